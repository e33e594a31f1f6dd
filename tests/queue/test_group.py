"""The group core: fairness across keys through real leases, and what a rebuild restores."""

from __future__ import annotations

import random

from brook.models import State
from brook.queue.group import Change, GroupCore, Position
from brook.queue.lifecycle import Settings


def test_four_workers_reach_every_cold_key_within_the_first_thousand_leases() -> None:
    core = GroupCore(Settings(), random.Random(0))
    offset = 0
    for _ in range(100_000):
        core.offer((0, offset), "hot", 0)
        offset += 1
    for key in range(100):
        for _ in range(10):
            core.offer((1, offset), f"cold-{key}", 0)
            offset += 1
    first: dict[object, int] = {}
    leases = 0
    while leases < 1_000:
        for _worker in range(4):
            for position, transition in core.lease(now_ms=leases, count=10):
                if transition.state is State.LEASED:
                    first.setdefault(core.keys[position], leases)
                    leases += 1
                    assert transition.receipt is not None
                    core.settle(leases, transition.receipt, "ack")
    assert all(f"cold-{key}" in first for key in range(100)), "a key starved"


def test_a_rebuild_restores_leases_receipts_and_retries() -> None:
    settings = Settings(visibility_timeout_ms=1_000, ordering="key")
    records = [((0, i), "k" if i < 3 else "j", 0) for i in range(5)]
    core = GroupCore(settings, random.Random(1))
    for position, key, timestamp in records:
        core.offer(position, key, timestamp)
    log = core.lease(0, 5)
    receipts = {p: t.receipt for p, t in log}
    assert set(receipts) == {(0, 0), (0, 3)}, "one record per ordered key"
    log += core.settle(10, str(receipts[(0, 3)]), "nack", "flaky", delay_ms=100)
    rebuilt = GroupCore.rebuild(settings, random.Random(2), records, log)
    assert (
        rebuilt.stats()
        == core.stats()
        == {
            "ready": 3,
            "leased": 1,
            "retrying": 1,
            "dead": 0,
            "acked": 0,
            "delayed": 0,
        }
    )
    rebuilt.settle(20, str(receipts[(0, 0)]), "ack")  # a receipt survives the restart
    assert [p for p, t in rebuilt.lease(20, 5) if t.state is State.LEASED] == [(0, 1)]
    assert [p for p, t in rebuilt.lease(200, 5) if t.state is State.LEASED] == [(0, 3)]


def _leased(changes: list[Change]) -> dict[Position, str]:
    return {p: str(t.receipt) for p, t in changes if t.state is State.LEASED}


def test_a_record_released_for_later_holds_its_ordered_key_as_a_nack_does() -> None:
    """With ordering="key" the key's later records wait behind the released one (their
    order is kept), other keys go; when it is due it leads its key again, its attempt
    not spent; a rebuild from the log holds the key the same way."""
    settings = Settings(visibility_timeout_ms=1_000, ordering="key")
    records = [((0, 0), "k", 0), ((0, 1), "k", 0), ((0, 2), "j", 0)]
    core = GroupCore(settings, random.Random(1))
    for position, key, timestamp in records:
        core.offer(position, key, timestamp)
    log = core.lease(0, 5)
    receipts = _leased(log)
    assert set(receipts) == {(0, 0), (0, 2)}
    log += core.settle(10, receipts[(0, 0)], "release", "not mine", delay_ms=200)
    assert core.jobs[(0, 0)].state is State.RETRYING and core.jobs[(0, 0)].attempt == 0
    assert core.stats()["retrying"] == 1
    assert _leased(core.lease(20, 5)) == {}, "k's next record waits behind the released one"
    rebuilt = GroupCore.rebuild(settings, random.Random(2), records, log)
    assert rebuilt.jobs == core.jobs and rebuilt.stats() == core.stats()
    for group in (core, rebuilt):
        assert _leased(group.lease(209, 5)) == {}
        changes = group.lease(210, 5)
        assert list(_leased(changes)) == [(0, 0)]
        assert [t.attempt for _, t in changes if t.state is State.LEASED] == [1]


def test_a_record_released_for_later_frees_its_key_under_a_per_key_limit() -> None:
    """With concurrency_per_key, a released record waiting for its delay no longer
    counts against its key, as a nacked one: the key's next record goes at once."""
    settings = Settings(visibility_timeout_ms=1_000, concurrency_per_key=1)
    records = [((0, 0), "k", 0), ((0, 1), "k", 0)]
    core = GroupCore(settings, random.Random(1))
    for position, key, timestamp in records:
        core.offer(position, key, timestamp)
    log = core.lease(0, 5)
    (first,) = _leased(log).values()
    log += core.settle(10, first, "release", "not mine", delay_ms=200)
    changes = core.lease(20, 5)
    log += changes
    assert list(_leased(changes)) == [(0, 1)]
    rebuilt = GroupCore.rebuild(settings, random.Random(2), records, log)
    assert rebuilt.jobs == core.jobs and rebuilt.stats() == core.stats()
    for group in (core, rebuilt):
        assert _leased(group.lease(210, 5)) == {}, "the key is at its limit: (0, 1) is out"
        group.settle(220, _receipt(group, (0, 1)), "ack")
        changes = group.lease(220, 5)
        assert list(_leased(changes)) == [(0, 0)]
        assert [t.attempt for _, t in changes if t.state is State.LEASED] == [1]


def _receipt(group: GroupCore, position: Position) -> str:
    return str(group.jobs[position].receipt)


def test_a_release_without_a_delay_puts_the_record_back_at_once() -> None:
    settings = Settings(visibility_timeout_ms=1_000, ordering="key")
    core = GroupCore(settings, random.Random(1))
    core.offer((0, 0), "k", 0)
    core.offer((0, 1), "k", 0)
    (receipt,) = _leased(core.lease(0, 5)).values()
    core.settle(10, receipt, "release", "not mine")
    changes = core.lease(10, 5)
    assert list(_leased(changes)) == [(0, 0)], "back at the front of its key"
    assert [t.attempt for _, t in changes if t.state is State.LEASED] == [1]
