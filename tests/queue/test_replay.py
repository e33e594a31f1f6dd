"""Replays: acked records of a queue group sent again, from an offset on.

A model of every record's state is held beside a real broker through appends,
leases, acks, deaths, redrives, replays and restarts, with a window and snapshots
small enough that a replay runs past the window and across snapshots."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import brook
from brook import limits
from brook.clock import Clock
from brook.queue.shell import QueueGroup
from brook.records import Job, Record

Position = tuple[int, int]


class ReplayMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.saved = (limits.queue_window_records_max, limits.queue_snapshot_changes)
        limits.queue_window_records_max = 6
        limits.queue_snapshot_changes = 7
        self.path = tempfile.mkdtemp(prefix="brook-replay-")
        self.b = brook.open(self.path)
        self.b.create_topic("t", partitions=2)
        self.state: dict[Position, str] = {}
        """Each record's state: pending, leased, acked or dead."""
        self.held: dict[Position, Job] = {}
        self.acks = 0
        self._queue()

    def _queue(self) -> None:
        self.q = self.b.queue("t", "g", max_attempts=1, visibility_timeout_ms=600_000)

    def _group(self) -> QueueGroup:
        group = self.b.queues.find("t", "g")
        assert group is not None
        return group

    def _in(self, state: str) -> list[Position]:
        return sorted(p for p, s in self.state.items() if s == state)

    @rule(count=st.integers(1, 5), key=st.sampled_from([b"a", b"b", b"c"]))
    def append(self, count: int, key: bytes) -> None:
        acks = self.b.topic("t").append_many([Record(b"v", key=key) for _ in range(count)])
        for ack in acks:
            self.state[(ack.partition, ack.offset)] = "pending"

    @rule(count=st.integers(1, 8))
    def lease(self, count: int) -> None:
        jobs = self.q.lease(max_records=count, timeout=0)
        pending, leased = len(self._in("pending")), len(self._in("leased"))
        if leased + count <= limits.queue_window_records_max:  # (leases take window room)
            assert len(jobs) == min(count, pending)
        for job in jobs:
            position = (job.record.partition, job.record.offset)
            assert self.state[position] == "pending", (
                f"{position} leased while {self.state[position]}"
            )
            self.state[position] = "leased"
            self.held[position] = job

    @precondition(lambda self: self.held)
    @rule(data=st.data(), outcome=st.sampled_from(["ack", "nack"]))
    def settle(self, data: st.DataObject, outcome: str) -> None:
        chosen = data.draw(st.lists(st.sampled_from(sorted(self.held)), min_size=1, unique=True))
        jobs = [self.held.pop(position) for position in chosen]
        if outcome == "ack":
            self.q.ack(jobs)
            self.acks += len(jobs)
        else:
            self.q.nack(jobs, delay_ms=0)  # max_attempts=1: dead
        for position in chosen:
            self.state[position] = "acked" if outcome == "ack" else "dead"

    @rule()
    def redrive(self) -> None:
        dead = self._in("dead")
        assert self.q.redrive() == len(dead)
        for position in dead:
            self.state[position] = "pending"

    @rule(partition=st.integers(0, 1), offset=st.integers(0, 30))
    def replay(self, partition: int, offset: int) -> None:
        again = [p for p in self._in("acked") if p[0] == partition and p[1] >= offset]
        assert self._group().replay(partition, offset) == len(again)
        for position in again:
            self.state[position] = "pending"

    @rule()
    def restart(self) -> None:
        self.b.close()
        self.b = brook.open(self.path)
        self._queue()

    @invariant()
    def every_record_stands_where_the_model_says(self) -> None:
        stats = self.q.stats()
        assert stats["ready"] == len(self._in("pending"))
        assert stats["leased"] == len(self._in("leased"))
        assert stats["dead"] == len(self._in("dead"))
        assert stats["acked"] == self.acks
        told = {"ready": "pending", "pending": "pending"}
        for (partition, offset), state in self.state.items():
            found = self.q.job(partition, offset).state
            assert told.get(found, found) == state, f"({partition}, {offset}) is {found}"

    def teardown(self) -> None:
        try:
            # Every record still to go is leased once, and no other.
            if self.held:
                self.q.ack(list(self.held.values()))  # (leases take window room)
            leased: list[Position] = []
            while jobs := self.q.lease(max_records=50, timeout=0):
                leased += [(j.record.partition, j.record.offset) for j in jobs]
                self.q.ack(jobs)
            assert sorted(leased) == self._in("pending")
        finally:
            self.b.close()
            shutil.rmtree(self.path, ignore_errors=True)
            limits.queue_window_records_max, limits.queue_snapshot_changes = self.saved


ReplayMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_replay_state_machine = ReplayMachine.TestCase


def test_a_replay_brings_back_records_removed_from_memory_and_keeps_their_age_from_the_replay(
    tmp_path: Path,
) -> None:
    """Old records replayed are not expired at once: their age counts from the replay."""
    now = [1_800_000_000.0]
    clock = Clock(wall=lambda: now[0], monotonic=lambda: now[0])
    with brook.open(str(tmp_path), clock=clock) as b:
        b.topic("t").append_many([Record(b"%d" % i) for i in range(5)])
        q = b.queue("t", "g", expire_after_ms=60_000)
        q.ack(q.lease(max_records=5))
        now[0] += 3_600  # an hour later, far past expire_after_ms
        group = b.queues.find("t", "g")
        assert group is not None
        assert group.replay(0, 2) == 3
    with brook.open(str(tmp_path), clock=clock) as b:
        q = b.queue("t", "g")
        again = q.lease(max_records=10, timeout=0)
        assert [j.record.offset for j in again] == [2, 3, 4]
        assert [j.attempt for j in again] == [1, 1, 1]
        assert q.stats()["dead"] == 0


@pytest.mark.parametrize("offset", [0, 5])
def test_a_replay_of_nothing_acked_brings_back_nothing_and_writes_nothing(
    tmp_path: Path, offset: int
) -> None:
    with brook.open(str(tmp_path)) as b:
        b.topic("t").append_many([Record(b"x")] * 5)
        b.queue("t", "g")
        group = b.queues.find("t", "g")
        assert group is not None
        end = group.status_log.durable_offset
        assert group.replay(0, offset) == 0
        assert group.status_log.durable_offset == end
