"""A seeded simulation of one queue group: many workers lease, ack, nack, extend,
discard, release (at once or for later), crash or wander off; an operator redrives dead
records and cancels waiting ones (a task's revoke); the broker itself
crashes and rebuilds from its status log. Records carry priorities and not-before
times; keys have limits. Checked at every step against the lifecycle's promises,
each computed here from the log alone. Set BROOK_SEED to replay; the seed is printed.
"""

from __future__ import annotations

import math
import os
import random
from collections import Counter
from dataclasses import dataclass, field

import pytest

from brook.errors import LeaseExpired
from brook.models import Backoff, State
from brook.queue.group import Change, GroupCore, Position, group_of
from brook.queue.lifecycle import Settings
from brook.scheduling import Schedule

RECORDS = 300
KEYS = 10
STEPS = 2_500

CASES = {
    "plain": {},
    "ordered": {"ordering": "key"},
    "per key 2": {"concurrency_per_key": 2},
    "priorities": {"lower_priority_share": 0.25},
    "key rate": {"key_rate_limit_per_s": 5.0, "concurrency_per_key": 3},
    "group rate": {"rate_limit_per_s": 40.0, "ordering": "key"},
}


@dataclass
class Oracle:
    """What the group must have done, kept from the outside: which records are out,
    when each key (and the group) was last given a lease, each record's schedule."""

    settings: Settings
    schedules: dict[Position, Schedule]
    keys: dict[Position, str]
    buckets: dict[object, tuple[float, int]] = field(default_factory=dict)
    """Per key (and None for the group), a token bucket replayed from the leases."""

    def limit(self) -> int | None:
        return 1 if self.settings.ordering == "key" else self.settings.concurrency_per_key

    def take(self, key: object, rate: float | None, now: int, context: str) -> None:
        """A lease of `key` at `now`: the bucket must have had a whole token."""
        if rate is None:
            return
        burst = max(1.0, rate)
        tokens, at = self.buckets.get(key, (burst, now))
        tokens = min(burst, tokens + (now - at) * rate / 1000)
        assert tokens >= 1 - 1e-9, f"{key!r} leased past its rate limit ({context})"
        self.buckets[key] = (tokens - 1, now)

    def bucket_ready(self, key: object, rate: float | None, now: int) -> bool:
        if rate is None:
            return True
        tokens, at = self.buckets.get(key, (max(1.0, rate), now))
        refill = at + max(1, math.ceil((1 - tokens) * 1000 / rate)) if tokens < 1 else at
        return now >= refill

    def restarted(self) -> None:
        self.buckets.clear()  # a rebuilt group starts with full buckets


def ready_since(core: GroupCore, oracle: Oracle, p: Position) -> int:
    """When the record became ready: its not-before time, if it had one and was never leased."""
    job, schedule = core.jobs[p], oracle.schedules.get(p)
    if schedule is not None and schedule[1] is not None and job.untouched:
        return max(job.ready_at_ms, schedule[1])
    return job.ready_at_ms


def check(core: GroupCore, oracle: Oracle, now: int, context: str) -> None:
    settings = oracle.settings
    indexed = {(p, error) for error, bucket in core.dead_by_error.items() for p in bucket}
    dead = {(p, group_of(job.error)) for p, job in core.jobs.items() if job.state is State.DEAD}
    assert indexed == dead, f"the dead records' index is off ({context})"
    # Liveness: a ready record is handed out unless it is not due yet, or its key
    # (or the group) is at a limit.
    out: Counter[object] = Counter()
    for p, job in core.jobs.items():
        if job.state is State.LEASED or (
            job.state is State.RETRYING and settings.ordering == "key"
        ):
            out[core.keys.get(p)] += 1
    limit = oracle.limit()

    def due(p: Position) -> bool:
        schedule = oracle.schedules.get(p)
        job = core.jobs[p]
        return schedule is None or schedule[1] is None or not job.untouched or schedule[1] <= now

    def may_go(p: Position) -> bool:
        key = core.keys.get(p)
        if key is None:
            return True
        if limit is not None and out[key] >= limit:
            return False
        return oracle.bucket_ready(key, settings.key_rate_limit_per_s, now)

    ready = [p for p, job in core.jobs.items() if job.state is State.READY]
    if settings.ordering == "key":
        # A key's lane is led by a record put back (due), else by its lowest offset
        # never leased; none of the key's records go while that one is not due.
        blocked = set()
        by_key: dict[object, list[Position]] = {}
        for p in sorted(ready):
            if core.keys.get(p) is not None:
                by_key.setdefault(core.keys[p], []).append(p)
        for key, positions in by_key.items():
            jobs = [core.jobs[p] for p in positions]
            if any(job.ready_at_ms != job.since_ms for job in jobs):
                continue
            firsts = [p for p in positions if core.jobs[p].lives == 0]
            if firsts and not due(firsts[0]):
                blocked.add(key)
        leasable = any(
            due(p) and may_go(p) and (core.keys.get(p) is None or core.keys[p] not in blocked)
            for p in ready
        )
    else:
        leasable = any(due(p) and may_go(p) for p in ready)
    leasable = leasable and oracle.bucket_ready(None, settings.rate_limit_per_s, now)
    assert core.has_ready() == leasable, (
        f"a lease would hand out {'nothing' if leasable else 'a held record'} ({context})"
    )
    delayed = sum(1 for p in ready if not due(p))
    assert core.stats()["delayed"] == delayed, f"the delayed count is off ({context})"
    behind_delays = settings.ordering == "key" and any(
        core.keys.get(p) is not None and p in oracle.schedules and core.jobs[p].untouched
        for p in ready
    )
    if not delayed and not behind_delays:  # (records held behind a delayed one are not seen)
        waiting = [ready_since(core, oracle, p) for p in ready]
        assert core.oldest_ready_ms() == min(waiting, default=None), (
            f"the oldest ready record's age is off ({context})"
        )
    receipts = [job.receipt for job in core.jobs.values() if job.state is State.LEASED]
    assert len(receipts) == len(set(receipts)), f"two live leases share a receipt ({context})"
    for job in core.jobs.values():
        assert job.attempt <= settings.max_attempts, f"too many attempts ({context})"
    if limit is not None:
        assert all(n <= limit for k, n in out.items() if k is not None), (
            f"a key has more records out than its limit ({context})"
        )
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


@pytest.mark.parametrize("case", list(CASES))
def test_every_record_ends_exactly_once(case: str) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"queue simulation seed: {seed} ({case}; replay with BROOK_SEED={seed})")
    rng = random.Random(seed)
    settings = Settings(
        visibility_timeout_ms=1_000, max_attempts=3, backoff=Backoff(50, 2.0, 400), **CASES[case]
    )
    keys = [rng.randrange(KEYS) for _ in range(RECORDS)]
    # As in a topic, all records of a key are in one partition (here key % 2).
    # Key 0 stands for records without a key (they have no order to keep).
    records = [((key % 2, i), f"k{key}" if key else None, i // 50) for i, key in enumerate(keys)]
    schedules: dict[Position, Schedule] = {}
    for position, _, timestamp in records:
        if rng.random() < 0.35:
            priority = rng.choice([0, -2, 1, 3])
            not_before = timestamp + rng.randrange(3_000) if rng.random() < 0.6 else None
            if priority or not_before is not None:
                schedules[position] = (priority, not_before)
    oracle = Oracle(settings, schedules, {p: k for p, k, _ in records if k is not None})
    core = GroupCore(settings, random.Random(seed + 1))
    for position, key, timestamp in records:
        core.offer(position, key, timestamp, schedules.get(position))
    log: list[Change] = []
    held: list[tuple[str, Position]] = []  # receipts the workers hold, live or not
    ever_leased: set[Position] = set()
    now = 0

    def leased(changes: list[Change], context: str) -> list[tuple[str, Position]]:
        """Check each lease against the schedules and the rate limits; its receipts."""
        got = []
        for p, t in changes:
            if t.state is not State.LEASED or t.receipt is None:
                continue
            schedule = schedules.get(p)
            if p not in ever_leased and schedule is not None and schedule[1] is not None:
                assert now >= schedule[1], f"{p} leased before its not-before time ({context})"
            ever_leased.add(p)
            key = oracle.keys.get(p)
            if key is not None:
                oracle.take(key, settings.key_rate_limit_per_s, now, context)
            oracle.take(None, settings.rate_limit_per_s, now, context)
            got.append((t.receipt, p))
        return got

    def settle(receipt: str, position: Position, action: str) -> None:
        job = core.jobs.get(position)
        live = job is not None and job.receipt == receipt and now < job.lease_until_ms
        try:
            if action == "release later":  # given back unused, due again after a delay
                delay = rng.randrange(1, 600)
                log.extend(core.settle(now, receipt, "release", "not mine", delay))
            else:
                log.extend(core.settle(now, receipt, action, "boom", None, 500))
        except LeaseExpired:
            assert not live, f"a live receipt was refused (seed {seed})"
            return
        assert live, f"a stale receipt was accepted (seed {seed})"

    for step in range(STEPS):
        context = f"seed {seed}, step {step}"
        roll = rng.random()
        if roll < 0.2:
            now += rng.randrange(1, 400)
            log.extend(core.tick(now))
        elif roll < 0.5:
            changes = core.lease(now, rng.randrange(1, 6))
            log.extend(changes)
            held.extend(leased(changes, context))
        elif roll < 0.93 and held:
            receipt, position = held.pop(rng.randrange(len(held)))
            action = rng.choices(
                ["ack", "nack", "extend", "discard", "release", "release later", "walk off"],
                [60, 25, 5, 3, 5, 5, 7],
            )[0]
            if action != "walk off":  # a worker that dies keeps its lease until it expires
                settle(receipt, position, action)
        elif roll < 0.95:
            core = GroupCore.rebuild(
                settings, random.Random(step), records, log, schedules=schedules, now_ms=now
            )
            oracle.restarted()
            log.extend(core.tick(now))
        elif roll < 0.96:  # an operator redrives some dead records
            log.extend(core.redrive(now, rng.choice([None, 1, 5])))
        elif roll < 0.97:  # some records are cancelled (a task's revoke)
            log.extend(core.tick(now))
            chosen = [records[rng.randrange(RECORDS)][0] for _ in range(rng.randrange(1, 4))]
            before = {p: core.jobs.get(p) for p in chosen}
            changes, cancelled = core.cancel(now, chosen, "revoked")
            log.extend(changes)
            for p, was in before.items():
                waiting = was is not None and was.state in (State.READY, State.RETRYING)
                assert (p in cancelled) == waiting, f"{p} cancelled: {p in cancelled} ({context})"
                if waiting:
                    assert core.jobs[p].state is State.DEAD and core.jobs[p].error == "revoked"
        check(core, oracle, now, context)

    for _ in range(10_000):  # drain: everything still open gets leased and acked
        if all(job.state is State.DEAD for job in core.jobs.values()):
            break
        now += 500
        log.extend(core.tick(now))
        changes = core.lease(now, 50)
        log.extend(changes)
        for receipt, _ in leased(changes, f"seed {seed}, draining"):
            log.extend(core.settle(now, receipt, "ack"))
        check(core, oracle, now, f"seed {seed}, draining")
    else:
        raise AssertionError(f"the queue never drained (seed {seed})")

    ended = Counter(t.state for _, t in log if t.state in (State.ACKED, State.DEAD))
    acked_positions = Counter(p for p, t in log if t.state is State.ACKED)
    assert all(n == 1 for n in acked_positions.values()), f"a record acked twice (seed {seed})"
    dead = {p for p, job in core.jobs.items() if job.state is State.DEAD}
    assert not dead & set(acked_positions), f"a record both acked and dead (seed {seed})"
    assert len(acked_positions) + len(dead) == RECORDS, f"a record was lost (seed {seed})"
    assert core.stats()["acked"] == len(acked_positions)
    rebuilt = GroupCore.rebuild(settings, random.Random(0), records, log, schedules=schedules)
    rebuilt.tick(now)
    assert rebuilt.stats() == core.stats(), f"the status log disagrees (seed {seed})"
    assert rebuilt.jobs == core.jobs, f"the status log rebuilds other jobs (seed {seed})"
    assert ended[State.ACKED] == len(acked_positions)
