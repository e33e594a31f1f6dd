"""The group core's index of dead records by error group: what the dashboard lists,
counts and redrives by (queue/error_groups.py forms the key)."""

from __future__ import annotations

import random
from collections.abc import Hashable

from brook.models import ErrorGroup, State
from brook.queue.group import Change, GroupCore, Position
from brook.queue.lifecycle import Settings

Record = tuple[Position, Hashable, int]


def summary(customer: int, outer: str = "/srv/app/jobs.py:3 in run") -> str:
    """A task's error summary as the worker leaves it: the message carries an id."""
    return f"ValueError: no customer {customer}\n  {outer}\n  /srv/app/orders.py:12 in charge"


def died(reasons: list[str]) -> tuple[GroupCore, list[Change], list[Record]]:
    """A group whose records died, one of each reason (max_attempts=1), in order."""
    core = GroupCore(Settings(max_attempts=1), random.Random(0))
    records: list[Record] = [((0, n), f"key-{n}", 0) for n in range(len(reasons))]
    for position, key, timestamp in records:
        core.offer(position, key, timestamp)
    log = core.lease(1, len(reasons))
    receipts = {p: t.receipt for p, t in log}
    for n, reason in enumerate(reasons):
        log += core.settle(2, str(receipts[(0, n)]), "nack", reason)
    assert core.stats()["dead"] == len(reasons)
    return core, log, records


def test_records_that_differ_only_in_ids_are_one_group_with_an_example() -> None:
    reasons = [summary(n, f"/srv/app/v{n}/jobs.py:{n} in run") for n in range(5)]
    reasons += ["no customer 123", "no customer 456", "HTTP 500", "HTTP 503", "HTTP 503"]
    core, _, _ = died(reasons)
    assert core.dead_errors() == [
        ErrorGroup("ValueError at orders.py:12 in charge", 5, reasons[0]),
        ErrorGroup("HTTP 503", 2, "HTTP 503"),
        ErrorGroup("no customer N", 2, "no customer 123"),
        ErrorGroup("HTTP 500", 1, "HTTP 500"),
    ]
    assert list(core.dead_in("ValueError at orders.py:12 in charge")) == [(0, n) for n in range(5)]
    assert core.dead_in(summary(99)) == core.dead_in("ValueError at orders.py:12 in charge"), (
        "a whole error stands for its group"
    )
    assert core.dead_in("no such group") == {}


def test_redriving_a_group_redrives_every_record_of_it_and_the_example_moves_on() -> None:
    core, _, _ = died([summary(n) for n in range(5)] + ["HTTP 500"])
    group = "ValueError at orders.py:12 in charge"
    core.redrive(3, None, [(0, 0)])
    assert core.dead_errors()[0] == ErrorGroup(group, 4, summary(1))
    changes = core.redrive(4, None, list(core.dead_in(group)))
    assert sorted(p for p, t in changes if t.state is State.READY) == [(0, n) for n in (1, 2, 3, 4)]
    assert core.dead_errors() == [ErrorGroup("HTTP 500", 1, "HTTP 500")]
    assert core.stats()["dead"] == 1


def test_a_rebuild_groups_the_dead_as_the_live_group_did() -> None:
    core, log, records = died(
        [summary(n) for n in range(3)] + ["lease expired on the last attempt (1)"]
    )
    rebuilt = GroupCore.rebuild(core.settings, random.Random(1), records, log)
    assert rebuilt.dead_errors() == core.dead_errors()
    assert [e.group for e in rebuilt.dead_errors()] == [
        "ValueError at orders.py:12 in charge",
        "lease expired on the last attempt (N)",
    ]
