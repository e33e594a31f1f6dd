"""The process the timer crash test kills: threads schedule timers in batches
(due from now to a few seconds ahead) and cancel some, while the broker fires.

Usage: python timer_worker.py DATA_DIR|URL RUN SEED THREADS

Reports, each only after the call returned: "S id due_ms" for a scheduled
timer, "C id" for a cancel that returned True; and "c id" before trying to
cancel (a kill may land after the cancel is durable, before "C").
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from typing import Any

import brook
from brook import limits
from brook.errors import BrookError

TOPIC = "fired"
DUE_WITHIN_MS = 3_000

_out = threading.Lock()


def report(lines: list[str]) -> None:
    if lines:
        with _out:
            os.write(1, ("\n".join(lines) + "\n").encode())


def work(broker: Any, run: int, thread: int, seed: int) -> None:
    rng = random.Random(seed)
    for batch in range(1_000_000):
        now = int(time.time() * 1000)
        specs = [
            brook.TimerSpec(
                TOPIC,
                f"{run}.{thread}.{batch}.{i}".encode(),
                at=now + rng.randrange(-200, DUE_WITHIN_MS),
                timer_id=f"r{run}-t{thread}-b{batch}-{i}",
            )
            for i in range(rng.randint(1, 50))
        ]
        ids = broker.schedule_many(specs)
        report([f"S {timer_id} {spec.at}" for timer_id, spec in zip(ids, specs, strict=True)])
        doomed = [timer_id for timer_id in ids if rng.random() < 0.1]
        report([f"c {timer_id}" for timer_id in doomed])  # about to cancel: maybe cancelled
        report([f"C {timer_id}" for timer_id in doomed if broker.cancel_timer(timer_id)])


def until_the_broker_dies(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except BrookError:
        return


SMALL = {"timer_bucket_ms": 1_000, "timer_lookahead_ms": 300, "timer_flush_ms": 300}
"""For an embedded broker: buckets of a second and frequent flushes, so kills land
in bucket loads and flushes too (the parent opens its brokers with the same)."""


def main() -> None:
    where, run, seed, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    if not where.startswith("http"):
        for name, value in SMALL.items():
            setattr(limits, name, value)
    broker: Any = brook.connect(where) if where.startswith("http") else brook.open(where)
    report(["READY"])
    workers = [
        threading.Thread(target=until_the_broker_dies, args=(work, broker, run, n, seed * 10 + n))
        for n in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    time.sleep(60)  # the parent kills us


if __name__ == "__main__":
    main()
