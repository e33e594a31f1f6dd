"""A queue group's state lives in its status log: restarts, snapshots, failed writes."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

import brook
from brook import limits
from brook.clock import Clock as BrookClock
from brook.errors import LeaseExpired, StorageError
from brook.models import State
from brook.records import Record
from brook.storage.faulty import FaultyStorage
from brook.storage.local import LocalStorage
from tests.s3server import MotoServer


class Clock:
    """Time that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def passing(self) -> BrookClock:
        """As the broker's clock: wall and monotonic time move together (time really
        passes; a wall clock stepped alone ages no record)."""
        return BrookClock(wall=self, monotonic=self)


def _fill(b: brook.Broker, count: int, key: bytes | None = None) -> None:
    b.topic("jobs").append_many([Record(str(i).encode(), key=key) for i in range(count)])


def test_every_state_survives_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        _fill(b, 6)
        q = b.queue("jobs", "g", max_attempts=1, visibility_timeout_ms=60_000)
        jobs = q.lease(max_records=4)
        q.ack(jobs[0])
        q.discard(jobs[1], reason="bad")
        q.nack(jobs[2], delay_ms=5_000)  # max_attempts=1: dead
        leased = jobs[3]
        before = q.stats()
    with brook.open(str(tmp_path), clock=clock) as b:
        q = b.queue("jobs", "g")
        assert q.stats() == before
        assert before["acked"] == 1 and before["dead"] == 2 and before["leased"] == 1
        q.ack(leased)  # a live lease's receipt still works after the restart
        with pytest.raises(LeaseExpired):
            q.ack(jobs[0])
        rest = q.lease(max_records=10)
        assert [j.record.value for j in rest] == [b"4", b"5"]
        assert len(b.topic("jobs.dlq").read(0, 0, 10)) == 2  # copied once, not again on start


def test_a_lease_expires_on_the_injected_clock_even_across_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        _fill(b, 1)
        q = b.queue("jobs", "g", visibility_timeout_ms=10_000)
        (job,) = q.lease(max_records=1)
    clock.now += 9
    with brook.open(str(tmp_path), clock=clock) as b:
        q = b.queue("jobs", "g")
        assert q.lease(max_records=1, timeout=0) == []
        clock.now += 2
        (again,) = q.lease(max_records=1, timeout=0)
        assert again.attempt == 2 and again.record.offset == job.record.offset
        trace = q.trace(0, 0)
        assert [t.state for t in trace] == [State.LEASED, State.READY, State.LEASED]
        assert trace[1].reason == "lease expired"


def test_expire_after_ms_sends_old_records_to_the_dead_letters(tmp_path: Path) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        _fill(b, 2)
        q = b.queue("jobs", "g", expire_after_ms=1_000)
        clock.now += 2
        assert q.lease(max_records=10, timeout=0) == []
        assert q.stats()["dead"] == 2
        copies = b.topic("jobs.dlq").read(0, 0, 10)
        assert [r.headers["brook.error"] for r in copies if r.headers] == [
            b"expired: older than expire_after_ms"
        ] * 2


def test_snapshots_bound_the_status_log_and_restore_the_same_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "queue_snapshot_changes", 50)
    with brook.Broker(LocalStorage(tmp_path), segment_bytes_max=2_000) as b:
        _fill(b, 2_000, key=None)
        q = b.queue("jobs", "g", max_attempts=2)
        acked: list[int] = []
        for _ in range(30):
            jobs = q.lease(max_records=50)
            q.ack(jobs[:40], results=[str(j.record.offset).encode() for j in jobs[:40]])
            acked.extend(j.record.offset for j in jobs[:40])
            q.nack(jobs[40:45], delay_ms=0)
            q.discard(jobs[45:], reason="poison")
        b.core.run_maintenance()
        group = b.queues.find("jobs", "g")
        assert group is not None
        assert group.snapshot_offset > 0
        assert group.status_log.start_offset > 0, "status segments behind the snapshot are deleted"
        before = q.stats()
        leased = q.lease(max_records=3)
    with brook.Broker(LocalStorage(tmp_path), segment_bytes_max=2_000) as b:
        q = b.queue("jobs", "g")
        after = q.stats()
        assert {k: after[k] for k in ("acked", "dead", "retrying")} == {
            k: before[k] for k in ("acked", "dead", "retrying")
        }
        assert after["leased"] == 3
        q.ack(leased)
        assert q.redrive() == before["dead"]
        # The results acks gave, before the snapshot and after it, are still told.
        chosen = (acked[0], acked[len(acked) // 2], acked[-1])
        told = [q.job(0, offset) for offset in chosen]
        assert [(j.state, j.result) for j in told] == [("acked", b"%d" % o) for o in chosen]


def test_a_status_write_that_fails_is_not_acknowledged_and_the_group_recovers(
    tmp_path: Path,
) -> None:
    faulty = FaultyStorage(LocalStorage(tmp_path))
    with brook.Broker(faulty) as b:
        _fill(b, 3)
        q = b.queue("jobs", "g")
        (first,) = q.lease(max_records=1)
        faulty.faults.sync_failures = 1
        with pytest.raises(StorageError):
            q.ack(first)
        # The ack was not made durable: the lease is still live, and acking again works.
        q.ack(first)
        faulty.faults.sync_failures = 1
        with pytest.raises(StorageError):
            q.lease(max_records=1)
        # The failed lease was never handed out: its record is leased afresh at attempt 1.
        jobs = q.lease(max_records=5)
        assert [(j.record.offset, j.attempt) for j in jobs] == [(1, 1), (2, 1)]
        q.ack(jobs)
        assert q.stats()["acked"] == 3


def test_deleting_the_topic_deletes_its_queue_groups(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        _fill(b, 2)
        q = b.queue("jobs", "g", max_attempts=9)
        q.ack(q.lease(max_records=1))
        b.delete_topic("jobs")
        assert not [n for n in b.storage.list("queues/")]
        assert not [n for n in b.storage.list("topics/__queues/")]
        _fill(b, 1)
        fresh = b.queue("jobs", "g")
        assert fresh.settings()["max_attempts"] == 5
        assert fresh.stats()["acked"] == 0
        assert [j.record.offset for j in fresh.lease(max_records=5)] == [0]


def test_retention_keeps_what_queue_groups_still_need_and_compacts_the_rest(
    tmp_path: Path,
) -> None:
    clock = Clock()
    with brook.Broker(LocalStorage(tmp_path), clock=clock.passing(), segment_bytes_max=4_000) as b:
        b.create_topic("jobs", retention_ms=60_000)
        for start in range(0, 300, 30):  # ten batches of 30 records, a few segments
            b.topic("jobs").append_many(
                [Record(b"%04d" % i + b"." * 200) for i in range(start, start + 30)]
            )
        segments = len(b.core.topic_state("jobs").logs[0].segments)
        assert segments >= 4
        q = b.queue("jobs", "g", visibility_timeout_ms=3_600_000)
        jobs = q.lease(max_records=300)
        keep = {5, 150}  # one unfinished record early on, one in the middle
        q.ack([j for j in jobs if j.record.offset not in keep])
        clock.now += 120  # every sealed segment is past retention
        b.core.run_maintenance()
        log = b.core.topic_state("jobs").logs[0]
        assert log.start_offset <= 5, "the segment holding an unfinished record stays"
        held = [r.offset for r in b.topic("jobs").read(0, 0, 1_000)]
        assert 5 in held and 150 in held
        assert len(held) < 300, "segments of finished records were compacted away"
        # What the group still needs is intact, at its offsets.
        q.ack([j for j in jobs if j.record.offset in keep])
        b.core.run_maintenance()
        assert b.topic("jobs").start_offsets()[0] > 150, "nothing needed: deleted"
    with brook.Broker(LocalStorage(tmp_path), clock=clock, segment_bytes_max=4_000) as b:
        assert b.queue("jobs", "g").stats()["acked"] == 300


def test_a_fresh_machine_rebuilds_the_queue_from_the_bucket(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    first = brook.open(url, endpoint_url=moto.endpoint, cache_dir=str(tmp_path / "dead-disk"))
    try:
        _fill(first, 20)
        q = first.queue("jobs", "g", max_attempts=3)
        jobs = q.lease(max_records=10)
        q.ack(jobs[:5])
        q.nack(jobs[5:7], delay_ms=60_000, reason="later")
        q.discard(jobs[7], reason="poison")
        leased = jobs[8:]
        before = q.stats()
        # The machine dies here: no close. A new one with an empty disk takes over.
        with brook.open(
            url, endpoint_url=moto.endpoint, cache_dir=str(tmp_path / "new-disk"), take_over=True
        ) as second:
            again = second.queue("jobs", "g")
            after = again.stats()
            assert {k: after[k] for k in ("ready", "leased", "retrying", "acked", "dead")} == {
                k: before[k] for k in ("ready", "leased", "retrying", "acked", "dead")
            }
            again.ack(leased)  # live leases keep their receipts
            assert [
                r.headers["brook.error"]
                for r in second.topic("jobs.dlq").read(0, 0, 5)
                if r.headers
            ] == [b"poison"]
            assert again.settings()["max_attempts"] == 3
    finally:
        with contextlib.suppress(brook.errors.BrookError):
            first.close()
