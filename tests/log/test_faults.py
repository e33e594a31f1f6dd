"""A full disk or a failing fsync: callers get the error, nothing is acknowledged, the log survives."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import brook
from brook.errors import StorageError
from brook.records import Ack, Record
from brook.storage.faulty import FaultyStorage
from brook.storage.local import LocalStorage
from brook.storage.memory import MemoryStorage
from tests.waiting import wait_for


@pytest.fixture(params=["local", "memory"])
def faulty(request: pytest.FixtureRequest, tmp_path: Path) -> FaultyStorage:
    inner = LocalStorage(tmp_path) if request.param == "local" else MemoryStorage()
    return FaultyStorage(inner)


def all_values(b: brook.Broker) -> list[bytes]:
    return [r.value for r in b.topic("t").read(0, 0, 10_000)]


def test_a_full_disk_fails_the_batch_and_appends_resume_when_space_returns(
    faulty: FaultyStorage,
) -> None:
    with brook.Broker(faulty) as b:
        t = b.topic("t")
        t.append_many([Record(b"a"), Record(b"b")])
        faulty.faults.disk_full = True
        with pytest.raises(StorageError, match="ENOSPC"):
            t.append_many([Record(b"lost-1"), Record(b"lost-2")])
        with pytest.raises(StorageError):
            t.append(b"lost-3")
        assert all_values(b) == [b"a", b"b"]
        assert t.end_offsets() == {0: 2}
        faulty.faults.disk_full = False
        assert t.append(b"c").offset == 2
        assert t.append(b"d").offset == 3
        assert all_values(b) == [b"a", b"b", b"c", b"d"]
    # Nothing of the failed batches reappears after a restart.
    with brook.Broker(faulty) as b:
        assert all_values(b) == [b"a", b"b", b"c", b"d"]


def test_a_roll_that_seals_but_cannot_start_the_next_segment_is_finished_later(
    faulty: FaultyStorage,
) -> None:
    with brook.Broker(faulty, segment_bytes_max=300) as b:
        t = b.topic("t")
        t.append(b"x" * 100)
        while b.core.topic_state("t").logs[0].segments[-1].durable_bytes < 300:
            t.append(b"x" * 100)  # the append after the segment is full rolls it
        before = all_values(b)
        faulty.faults.create_failures = 1
        with pytest.raises(StorageError, match="EIO"):
            t.append(b"rolls, then fails")
        assert all_values(b) == before
        assert t.append(b"next").offset == len(before), "the next append starts the segment"
        assert all_values(b) == [*before, b"next"]
    with brook.Broker(faulty, segment_bytes_max=300) as b:
        assert all_values(b) == [*before, b"next"]


def test_a_failed_fsync_is_never_acknowledged(faulty: FaultyStorage) -> None:
    with brook.Broker(faulty) as b:
        t = b.topic("t")
        t.append(b"a")
        faulty.faults.sync_failures = 1
        with pytest.raises(StorageError, match="EIO"):
            t.append(b"unsure")
        assert all_values(b) == [b"a"]
        ack = t.append(b"b")
        assert ack.offset == 1, "the failed record's offset is reused: offsets stay dense"
        assert all_values(b) == [b"a", b"b"]
    with brook.Broker(faulty) as b:
        assert all_values(b) == [b"a", b"b"]


def test_every_caller_of_a_failed_batch_gets_the_error(faulty: FaultyStorage) -> None:
    with brook.Broker(faulty, linger_ms=50) as b:
        t = b.topic("t")
        t.append(b"warm-up")
        faulty.faults.sync_failures = 1
        outcomes: list[object] = []
        lock = threading.Lock()

        def produce(i: int) -> None:
            try:
                result: object = t.append(f"r{i}".encode())
            except StorageError as exc:
                result = exc
            with lock:
                outcomes.append(result)

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failed = [o for o in outcomes if isinstance(o, StorageError)]
        acked = [o for o in outcomes if isinstance(o, Ack)]
        assert failed, "the injected fsync failure must reach its callers"
        assert len(failed) + len(acked) == 8
        stored = all_values(b)
        assert len(stored) == 1 + len(acked)
        assert sorted(a.offset for a in acked) == list(range(1, 1 + len(acked)))


def test_a_damaged_segment_is_written_again_without_traffic(faulty: FaultyStorage) -> None:
    """A checkpoint's sync fails and the disk is full for the rewrite that follows: once
    the disk is freed, the periodic checkpoint has the segment written again and passes,
    with no append to set it off, and nothing acknowledged is lost."""
    with brook.Broker(faulty, checkpoint_interval_ms=100) as b:
        t = b.topic("t")
        for value in (b"a", b"b", b"c"):
            t.append(value)
        faulty.faults.disk_full = True
        faulty.faults.sync_failures = 1
        with pytest.raises(StorageError):
            b.core.checkpoint()
        wait_for(lambda: "checkpoint" in {f.loop for f in b.failing()}, 10, "the failure shown")
        faulty.faults.disk_full = False
        wait_for(lambda: not b.failing(), 10, "the checkpoint passing again with no traffic")
        assert all_values(b) == [b"a", b"b", b"c"]
    with brook.Broker(faulty) as b:
        assert all_values(b) == [b"a", b"b", b"c"]
