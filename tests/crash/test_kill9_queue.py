"""kill -9 during heavy lease/ack traffic never loses queue state.

A child process (queue_worker.py) runs workers that lease, ack, nack and drop
records of a queue group while it appends more, on an embedded broker or through
`brook serve` with the Python client; the parent kills the broker with SIGKILL at
random moments, 20 times or more, and after each restart checks:

- no acked record comes back: a record acked at attempt n is never leased again;
- attempts are handed out once each, in order, and never beyond max_attempts
  (two live leases on one record would repeat an attempt);
- the rebuilt group agrees with its status log (folded here independently);

and at the end, once every lease has expired and the rest is worked off, that
every record of the topic was acked or is dead, each exactly once, with one
dead-letter copy per dead record. BROOK_SEED replays a run.
"""

from __future__ import annotations

import os
import random
import time
from collections import defaultdict
from pathlib import Path

import pytest

import brook
from brook.models import State
from brook.queue.shell import QueueGroup
from tests.crash import child
from tests.crash.crashes import Crash
from tests.crash.queue_worker import GROUP, MAX_ATTEMPTS, TOPIC, VISIBILITY_MS
from tests.waiting import slow

KILLS = int(os.environ.get("BROOK_QUEUE_CRASH_KILLS", "4"))
WORKER = Path(__file__).with_name("queue_worker.py")


def run_and_kill(
    data: Path, run: int, seed: int, delay_s: float, threads: int, served: bool
) -> list[str]:
    args = [str(run), str(seed), str(threads)]
    return child.run_and_kill_broker(WORKER, data, args, delay_s, served)


def fold_status_log(group: QueueGroup) -> tuple[int, dict[tuple[int, int], State]]:
    """(acked count, the last state of every record still kept), from the log alone."""
    acked = 0
    states: dict[tuple[int, int], State] = {}
    for _, entry in group._entries():
        if entry.snapshot is not None:
            acked = entry.snapshot.acked_count
            states = {(p, o): job.state for p, o, job in entry.snapshot.jobs}
        for p, o, transition in entry.changes:
            if transition.state is State.ACKED:
                acked += 1
                states.pop((p, o), None)
            else:
                states[(p, o)] = transition.state
    return acked, states


def check_group(b: brook.Broker, acked_at: dict[tuple[int, int], int], context: str) -> None:
    b.queues.stop()  # time must not move the group on while it is compared with its log
    group = b.queues.find(TOPIC, GROUP)
    assert group is not None, context
    with group.mutex:
        kept = dict(group.machine.jobs)
        core_acked = group.machine.acked
        offered = dict(group.offered)
    for p, o in acked_at:
        assert (p, o) not in kept and o < offered[p], f"acked {p}/{o} is not acked ({context})"
    log_acked, log_states = fold_status_log(group)
    assert log_acked == core_acked, f"acked: log {log_acked}, group {core_acked} ({context})"
    for position, state in log_states.items():
        job = kept.get(position)
        assert job is not None, f"{position} is {state.value} in the log, unknown ({context})"
        assert job.state is state, f"{position}: log {state}, group {job.state} ({context})"


@pytest.mark.crash
@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
def test_queue_state_survives_a_crash(crash: Crash, served: bool) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"queue crash test seed: {seed} (replay with BROOK_SEED={seed})")
    rng = random.Random(seed)
    data = crash.data
    cycles = crash.cycles(KILLS)
    attempts: dict[tuple[int, int], list[int]] = defaultdict(list)
    acked_at: dict[tuple[int, int], int] = {}
    for run in range(cycles):
        lines = run_and_kill(
            data, run, seed + run, rng.uniform(0.3, 0.9), rng.choice([1, 2, 4]), served
        )
        crash.after_kill(rng)
        context = f"seed {seed}, run {run}"
        for line in lines:
            tag, p, o, attempt = line.split()
            position, n = (int(p), int(o)), int(attempt)
            if tag == "L":
                assert position not in acked_at or n <= acked_at[position], (
                    f"{position} leased again at attempt {n} after its ack ({context})"
                )
                assert 1 <= n <= MAX_ATTEMPTS, f"{position} attempt {n} ({context})"
                assert n not in attempts[position], (
                    f"{position} attempt {n} handed out twice ({context})"
                )
                attempts[position].append(n)
            elif tag == "A":
                acked_at[position] = n
        with brook.open(str(data)) as b:
            check_group(b, acked_at, context)
    leased_in_order = all(a == sorted(a) for a in attempts.values())
    assert leased_in_order, f"attempts out of order (seed {seed})"
    assert len(acked_at) > cycles * 10, f"too few acks to mean anything: {len(acked_at)}"

    # Work off the rest: every record ends acked or dead, exactly once.
    time.sleep(VISIBILITY_MS / 1000)
    with brook.open(str(data)) as b:
        q = b.queue(TOPIC, GROUP)
        total = sum(b.topic(TOPIC).end_offsets().values())
        deadline = time.monotonic() + slow(60)
        while time.monotonic() < deadline:
            jobs = q.lease(max_records=1000, timeout=0.5)
            for job in jobs:
                position = (job.record.partition, job.record.offset)
                assert position not in acked_at, f"acked {position} came back (seed {seed})"
            q.ack(jobs)
            stats = q.stats()
            if stats["ready"] == stats["leased"] == stats["retrying"] == 0 and not jobs:
                break
        stats = q.stats()
        assert stats["acked"] + stats["dead"] == total, f"{stats}, {total} records (seed {seed})"
        dead_letters = b.topic(f"{TOPIC}.dlq")
        copies = (
            [r for p in range(1) for r in dead_letters.read(p, 0, 100_000)]
            if b.core.has_topic(f"{TOPIC}.dlq")
            else []
        )
        origins = [
            (int(r.headers["brook.origin.partition"]), int(r.headers["brook.origin.offset"]))
            for r in copies
            if r.headers
        ]
        assert len(origins) == len(set(origins)) == stats["dead"], (
            f"{len(origins)} dead-letter copies of {len(set(origins))} records, "
            f"{stats['dead']} dead (seed {seed})"
        )
    print(
        f"{crash.describe(cycles)}, {len(acked_at)} acks checked, {total} records: "
        f"{stats['acked']} acked, {stats['dead']} dead"
    )
