"""kill -9 during heavy scheduling and firing never loses or doubles a timer.

A child process (timer_worker.py) schedules timers in batches, due from now to
a few seconds ahead, and cancels some, while the broker fires them; the parent
kills the broker with SIGKILL at random moments, 20 times or more, embedded or
as `brook serve` reached with the Python client. After each restart and at the
end (once every timer is due) it checks the topic:

- every acknowledged timer that was not cancelled fired, and exactly once (a
  cancel cut off by the kill may have happened or not: the broker's word goes);
- no cancelled timer fired; no timer fired before it was due.

BROOK_SEED replays a run.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest

import brook
from brook import limits
from tests.crash import child
from tests.crash.crashes import Crash
from tests.crash.timer_worker import DUE_WITHIN_MS, SMALL, TOPIC
from tests.waiting import slow

KILLS = int(os.environ.get("BROOK_TIMER_CRASH_KILLS", "4"))
WORKER = Path(__file__).with_name("timer_worker.py")


def run_and_kill(
    data: Path, run: int, seed: int, delay_s: float, threads: int, served: bool
) -> list[str]:
    args = [str(run), str(seed), str(threads)]
    return child.run_and_kill_broker(WORKER, data, args, delay_s, served)


def fired_records(b: brook.Broker) -> list[brook.Record]:
    if not b.core.has_topic(TOPIC):
        return []
    out: list[brook.Record] = []
    while True:
        got = b.topic(TOPIC).read(0, len(out), 10_000)
        if not got:
            return out
        out.extend(got)


def check(
    records: list[brook.Record], due: dict[str, int], cancelled: set[str], context: str
) -> Counter[str]:
    counts: Counter[str] = Counter()
    for record in records:
        assert record.headers is not None, context
        timer_id = record.headers["brook.timer.id"].decode()
        counts[timer_id] += 1
        assert counts[timer_id] == 1, f"{timer_id} fired twice ({context})"
        assert timer_id not in cancelled, f"cancelled {timer_id} fired ({context})"
        if timer_id in due:
            assert record.timestamp >= due[timer_id], f"{timer_id} fired early ({context})"
    return counts


@pytest.mark.crash
@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
def test_timers_survive_a_crash(
    crash: Crash, served: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not served:
        for name, value in SMALL.items():
            monkeypatch.setattr(limits, name, value)
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"timer crash test seed: {seed} (replay with BROOK_SEED={seed})")
    rng = random.Random(seed)
    data = crash.data
    cycles = crash.cycles(KILLS)
    due: dict[str, int] = {}
    cancelled: set[str] = set()
    tried: set[str] = set()
    """Cancels tried whose answer the kill may have cut off: either outcome is right."""
    for run in range(cycles):
        lines = run_and_kill(
            data, run, seed + run, rng.uniform(0.2, 0.8), rng.choice([1, 2, 4]), served
        )
        crash.after_kill(rng)
        for line in lines:
            if line.startswith("S "):
                _, timer_id, at = line.split()
                due[timer_id] = int(at)
            elif line.startswith("C "):
                cancelled.add(line.split()[1])
            elif line.startswith("c "):
                tried.add(line.split()[1])
        with brook.open(str(data)) as b:
            check(fired_records(b), due, cancelled, f"seed {seed}, run {run}")
    assert len(due) > cycles * 20, f"too few timers to mean anything: {len(due)}"
    with brook.open(str(data)) as b:
        maybe = tried - cancelled
        unanswered = {t for t in maybe if (info := b.timer(t)) and info.state == "cancelled"}
        wanted = set(due) - cancelled - unanswered
        deadline = time.monotonic() + slow((max(due.values()) - time.time() * 1000) / 1000 + 30)
        while True:
            counts = check(fired_records(b), due, cancelled, f"seed {seed}, at the end")
            if wanted <= set(counts) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        missing = wanted - set(counts)
        assert not missing, f"{len(missing)} acknowledged timers never fired (seed {seed})"
    print(
        f"{crash.describe(cycles)}, {len(due)} timers acknowledged, {len(cancelled)} cancelled, "
        f"{len(wanted)} fired once each, none early (due within {DUE_WITHIN_MS} ms)"
    )
