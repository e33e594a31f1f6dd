"""The group core: fairness across keys through real leases, and what a rebuild restores."""

from __future__ import annotations

import random

from brook.queue.group import GroupCore
from brook.queue.lifecycle import Settings, State


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
