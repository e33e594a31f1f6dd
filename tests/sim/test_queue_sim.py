"""A seeded simulation of one queue group: many workers lease, ack, nack, extend,
discard, crash or wander off; an operator redrives dead records; the broker itself
crashes and rebuilds from its status log. Checked at every step against the lifecycle's promises. Set
BROOK_SEED to replay; the seed is printed.
"""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from brook.errors import LeaseExpired
from brook.queue.group import Change, GroupCore, Position
from brook.queue.lifecycle import Backoff, Settings, State

RECORDS = 300
KEYS = 10
STEPS = 4_000


def check(core: GroupCore, settings: Settings, context: str) -> None:
    indexed = {(p, error) for error, bucket in core.dead_by_error.items() for p in bucket}
    dead = {(p, job.error) for p, job in core.jobs.items() if job.state is State.DEAD}
    assert indexed == dead, f"the dead records' index is off ({context})"
    # Liveness: a ready record is handed out unless its key has a record out already.
    out_keys = {
        core.keys.get(p)
        for p, job in core.jobs.items()
        if job.state in (State.LEASED, State.RETRYING) and settings.ordering == "key"
    }
    leasable = any(
        job.state is State.READY and (core.keys.get(p) is None or core.keys.get(p) not in out_keys)
        for p, job in core.jobs.items()
    )
    assert core.has_ready() == leasable, (
        f"a lease would hand out {'nothing' if leasable else 'a held record'} ({context})"
    )
    waiting = [job.ready_at_ms for job in core.jobs.values() if job.state is State.READY]
    assert core.oldest_ready_ms() == min(waiting, default=None), (
        f"the oldest ready record's age is off ({context})"
    )
    receipts = [job.receipt for job in core.jobs.values() if job.state is State.LEASED]
    assert len(receipts) == len(set(receipts)), f"two live leases share a receipt ({context})"
    for job in core.jobs.values():
        assert job.attempt <= settings.max_attempts, f"too many attempts ({context})"
    if settings.ordering == "key":
        # A key's records go out one at a time in offset order. A redriven record is
        # the exception: it rejoins behind its key's others (they may be done already).
        by_key: dict[object, list[tuple[Position, State, int]]] = {}
        for position, job in sorted(core.jobs.items()):
            if job.state is not State.DEAD and position in core.keys:
                by_key.setdefault(core.keys[position], []).append((position, job.state, job.lives))
        for key, records in by_key.items():
            out = [
                (p, lives) for p, state, lives in records if state in (State.LEASED, State.RETRYING)
            ]
            assert len(out) <= 1, f"key {key} has {len(out)} records out ({context})"
            firsts = [p for p, _, lives in records if lives == 0]
            if out and out[0][1] == 0:
                assert out[0][0] == firsts[0], f"key {key} is out of offset order ({context})"


@pytest.mark.parametrize("ordering", ["none", "key"])
def test_every_record_ends_exactly_once(ordering: str) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"queue simulation seed: {seed} ({ordering}; replay with BROOK_SEED={seed})")
    rng = random.Random(seed)
    settings = Settings(
        visibility_timeout_ms=1_000,
        max_attempts=3,
        backoff=Backoff(50, 2.0, 400),
        ordering=ordering,
    )
    keys = [rng.randrange(KEYS) for _ in range(RECORDS)]
    # As in a topic, all records of a key are in one partition (here key % 2).
    # Key 0 stands for records without a key (they have no order to keep).
    records = [((key % 2, i), f"k{key}" if key else None, i) for i, key in enumerate(keys)]
    core = GroupCore(settings, random.Random(seed + 1))
    for position, key, timestamp in records:
        core.offer(position, key, timestamp)
    log: list[Change] = []
    held: list[tuple[str, Position]] = []  # receipts the workers hold, live or not
    now = 0

    def settle(receipt: str, position: Position, action: str) -> None:
        job = core.jobs.get(position)
        live = job is not None and job.receipt == receipt and now < job.lease_until_ms
        try:
            log.extend(core.settle(now, receipt, action, "boom", None, 500))
        except LeaseExpired:
            assert not live, f"a live receipt was refused (seed {seed})"
            return
        assert live, f"a stale receipt was accepted (seed {seed})"

    for step in range(STEPS):
        roll = rng.random()
        if roll < 0.2:
            now += rng.randrange(1, 400)
            log.extend(core.tick(now))
        elif roll < 0.5:
            changes = core.lease(now, rng.randrange(1, 6))
            log.extend(changes)
            held.extend((t.receipt, p) for p, t in changes if t.state is State.LEASED and t.receipt)
        elif roll < 0.93 and held:
            receipt, position = held.pop(rng.randrange(len(held)))
            action = rng.choices(
                ["ack", "nack", "extend", "discard", "release", "walk off"], [60, 25, 5, 3, 5, 7]
            )[0]
            if action != "walk off":  # a worker that dies keeps its lease until it expires
                settle(receipt, position, action)
        elif roll < 0.95:
            core = GroupCore.rebuild(settings, random.Random(step), records, log)
        elif roll < 0.96:  # an operator redrives some dead records
            log.extend(core.redrive(now, rng.choice([None, 1, 5])))
        check(core, settings, f"seed {seed}, step {step}")

    for _ in range(10_000):  # drain: everything still open gets leased and acked
        if all(job.state is State.DEAD for job in core.jobs.values()):
            break
        now += 500
        log.extend(core.tick(now))
        for position, transition in core.lease(now, 50):
            log.append((position, transition))
            if transition.state is State.LEASED and transition.receipt:
                log.extend(core.settle(now, transition.receipt, "ack"))
        check(core, settings, f"seed {seed}, draining")
    else:
        raise AssertionError(f"the queue never drained (seed {seed})")

    ended = Counter(t.state for _, t in log if t.state in (State.ACKED, State.DEAD))
    acked_positions = Counter(p for p, t in log if t.state is State.ACKED)
    assert all(n == 1 for n in acked_positions.values()), f"a record acked twice (seed {seed})"
    dead = {p for p, job in core.jobs.items() if job.state is State.DEAD}
    assert not dead & set(acked_positions), f"a record both acked and dead (seed {seed})"
    assert len(acked_positions) + len(dead) == RECORDS, f"a record was lost (seed {seed})"
    assert core.stats()["acked"] == len(acked_positions)
    rebuilt = GroupCore.rebuild(settings, random.Random(0), records, log)
    assert rebuilt.stats() == core.stats(), f"the status log disagrees (seed {seed})"
    assert rebuilt.jobs == core.jobs, f"the status log rebuilds other jobs (seed {seed})"
    assert ended[State.ACKED] == len(acked_positions)
