"""What the status log says of each record, read from outside the broker, is what
the live group holds: whatever calls were made, with snapshots in between."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brook
from brook import layout, limits
from brook.log.view import TopicView, read_records
from brook.models import State
from brook.queue import status
from brook.queue.inspect import GroupState, Touched, group_state, standing_of
from brook.records import Record
from brook.storage.location import open_reader
from tests.queue.test_shell import Clock

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 6)),
        st.tuples(st.just("lease"), st.integers(1, 5)),
        st.tuples(st.sampled_from(["ack", "nack", "discard", "extend"]), st.integers(0, 4)),
        st.tuples(st.just("wait"), st.integers(1, 120_000)),
        st.tuples(st.just("redrive"), st.integers(0, 3)),
    ),
    max_size=40,
)


def _outside_state(data: Path) -> GroupState:
    storage = open_reader(str(data))
    try:
        view = TopicView(storage, layout.queue_status_log("jobs", "g"), partitions=1)
        first, end = view.bounds()[0]
        entries = [
            (r.offset, status.decode(r.value))
            for piece in view.slices({0: first}, {0: end})
            for r in read_records(storage, piece)
        ]
    finally:
        storage.close()
    return group_state(entries)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=OPS)
def test_the_status_log_read_from_outside_agrees_with_the_live_group(
    ops: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "queue_snapshot_changes", 6)  # the same for every example
    clock = Clock()
    with tempfile.TemporaryDirectory() as folder, brook.open(folder, clock=clock) as b:
        topic = b.topic("jobs")
        topic.append_many([Record(b"x", key=b"k" if i % 3 else None) for i in range(4)])
        q = b.queue("jobs", "g", max_attempts=2, visibility_timeout_ms=30_000)
        held: list[brook.Job] = []
        for op, n in ops:
            if op == "append":
                topic.append_many([Record(b"y")] * n)
            elif op == "lease":
                held += q.lease(max_records=n, timeout=0)
            elif op == "wait":
                clock.now += n / 1000
            elif op == "redrive":
                dead = [p for p, job in q._group.machine.jobs.items() if job.state is State.DEAD]
                q.redrive(records=dead[:n])
            elif held:
                job = held.pop(n % len(held))
                try:
                    if op == "ack":
                        q.ack(job)
                    elif op == "nack":
                        q.nack(job, reason=f"failed {n}")
                    elif op == "discard":
                        q.discard(job, reason="poison")
                    else:
                        q.extend(job, 10_000)
                        held.append(job)
                except brook.errors.LeaseExpired:
                    pass
        q.stats()  # time acts, and what it did is logged
        group = q._group
        with group.mutex:
            live, offered = dict(group.machine.jobs), dict(group.offered)
        outside = _outside_state(Path(folder))
        for offset in range(topic.end_offsets()[0]):
            standing = standing_of(outside, 0, offset)
            job = live.get((0, offset))
            if job is None:
                expected = State.READY if offset >= offered.get(0, 0) else State.ACKED
                state = standing.job.state if isinstance(standing, Touched) else standing
                assert state is expected, (offset, standing)
            elif isinstance(standing, Touched):
                seen = standing.job
                assert (seen.state, seen.attempt, seen.error, seen.lives) == (
                    job.state,
                    job.attempt,
                    job.error,
                    job.lives,
                ), offset
                if job.state is State.LEASED:
                    assert (seen.receipt, seen.lease_until_ms) == (job.receipt, job.lease_until_ms)
                if job.state is State.RETRYING:
                    assert seen.ready_at_ms == job.ready_at_ms
            else:
                assert job.untouched and standing is State.READY, (offset, job, standing)
