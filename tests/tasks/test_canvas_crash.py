"""kill -9 of workers and of the broker, at random moments, while chords and chains
run: every callback is enqueued once, runs with every member's result in order, and
its reference gives the sum (a worker killed while running the callback makes it
run again, as any job: never as a second job). BROOK_SEED replays a run;
BROOK_CHORD_CRASH_ROUNDS sets how many kills (`make reliability` runs many)."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import defaultdict

import brook
from tests.tasks.conftest import Workers
from tests.waiting import slow

ROUNDS = int(os.environ.get("BROOK_CHORD_CRASH_ROUNDS", "3"))
CHORDS_A_ROUND = 3
MEMBERS = 12


def test_chords_survive_kill_9_of_workers_and_broker(workers: Workers) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"BROOK_SEED={seed}")
    app = workers.app
    square, gathered = app.tasks["square"], app.tasks["gathered"]
    running = [workers.start("--concurrency", "4") for _ in range(2)]
    for process in running:
        workers.started(process)
    expected: dict[str, tuple[brook.JobRef, list[int]]] = {}
    for round_ in range(ROUNDS):
        for c in range(CHORDS_A_ROUND):
            name = f"r{round_}c{c}"
            values = [rng.randrange(100) for _ in range(MEMBERS)]
            header = brook.group(square.s(name, v) for v in values)
            ref = brook.chord(header, gathered.s(name)).enqueue()
            expected[name] = (ref, [v * v for v in values])
        time.sleep(rng.uniform(0, 0.4))
        if rng.random() < 0.5:
            workers.restart_broker()
        else:
            victim = rng.randrange(len(running))
            os.kill(running[victim].pid, signal.SIGKILL)
            running[victim].wait()
            running[victim] = workers.start("--concurrency", "4")
            workers.started(running[victim])
    for name, (ref, squares) in expected.items():
        assert app.result(ref, timeout=slow(120)) == sum(squares), f"{name} (seed {seed})"
    runs: dict[str, list[dict[str, object]]] = defaultdict(list)
    for note in workers.notes():
        if note["event"] == "callback":
            runs[str(note["job"])].append(note)
    for name, (_, squares) in expected.items():
        assert runs[name], f"{name}'s callback never ran (seed {seed})"
        refs = {note["ref"] for note in runs[name]}
        assert len(refs) == 1, f"{name}'s callback was enqueued {len(refs)} times (seed {seed})"
        for note in runs[name]:
            assert note["results"] == squares, f"{name} (seed {seed})"
        attempts = [note["attempt"] for note in runs[name]]
        assert len(attempts) == len(set(attempts)), f"{name} ran twice in one attempt"
