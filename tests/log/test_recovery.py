"""Recovery: torn tails are cut, corruption is never served, rolls and seals survive reopening."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import brook
from brook.clock import Clock
from brook.errors import CorruptData
from brook.records import Record
from brook.storage.memory import MemoryStorage


def segment_files(root: Path, topic: str = "t", partition: int = 0) -> list[Path]:
    return sorted((root / "topics" / topic / str(partition)).glob("*.seg"))


def fill(b: brook.Broker, count: int, per_call: int = 10, topic: str = "t") -> None:
    for start in range(0, count, per_call):
        b.topic(topic).append_many(
            [Record(f"v{i}".encode()) for i in range(start, start + per_call)]
        )


def values(b: brook.Broker, topic: str = "t") -> list[bytes]:
    out: list[bytes] = []
    while True:
        got = b.topic(topic).read(0, len(out), 1000)
        if not got:
            return out
        out.extend(r.value for r in got)


def test_a_torn_tail_is_cut_and_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with brook.open(str(tmp_path)) as b:
        fill(b, 30)
    active = segment_files(tmp_path)[-1]
    whole = active.stat().st_size
    with open(active, "ab") as f:
        f.write(b"BTCH" + os.urandom(30))  # a batch whose write was cut short
    with caplog.at_level(logging.WARNING, logger="brook.log"), brook.open(str(tmp_path)) as b:
        assert values(b) == [f"v{i}".encode() for i in range(30)]
        assert "dropped 34 bytes" in caplog.text
        assert active.stat().st_size == whole
        assert b.topic("t").append(b"next").offset == 30


def test_a_cut_inside_the_last_batch_loses_only_that_batch(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        fill(b, 30)
    active = segment_files(tmp_path)[-1]
    with open(active, "r+b") as f:
        f.truncate(active.stat().st_size - 5)
    with brook.open(str(tmp_path)) as b:
        assert values(b) == [f"v{i}".encode() for i in range(20)]
        assert b.topic("t").end_offsets() == {0: 20}


def test_a_flipped_bit_in_a_sealed_segment_is_reported_not_served(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), segment_bytes_max=200) as b:
        fill(b, 40)
    first = segment_files(tmp_path)[0]
    data = bytearray(first.read_bytes())
    data[60] ^= 0x04  # inside the first batch's body
    first.write_bytes(bytes(data))
    with brook.open(str(tmp_path)) as b:
        with pytest.raises(CorruptData):
            b.topic("t").read(0, 0, 10)
        # Later segments are still served.
        later = b.topic("t").read(0, 30, 10)
        assert [r.offset for r in later] == list(range(30, 40))


def test_segments_roll_and_reopen_from_their_seals(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), segment_bytes_max=300) as b:
        fill(b, 100)
        assert len(segment_files(tmp_path)) > 3
        assert values(b) == [f"v{i}".encode() for i in range(100)]
    with brook.open(str(tmp_path), segment_bytes_max=300) as b:
        assert values(b) == [f"v{i}".encode() for i in range(100)]
        assert [r.offset for r in b.topic("t").read(0, 55, 3)] == [55, 56, 57]


def test_a_crash_during_sealing_is_recovered(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), segment_bytes_max=300) as b:
        fill(b, 50)
    sealed = segment_files(tmp_path)[-2]
    data = sealed.read_bytes()
    sealed.write_bytes(data[:-7])  # the seal was only partly written
    for newer in segment_files(tmp_path)[-1:]:
        newer.unlink()
    with brook.open(str(tmp_path), segment_bytes_max=300) as b:
        got = values(b)
        assert got == [f"v{i}".encode() for i in range(len(got))]
        b.topic("t").append(b"after")
        assert values(b)[-1] == b"after"


def test_power_loss_keeps_every_synced_record() -> None:
    store = MemoryStorage()
    b = brook.Broker(store)
    fill(b, 50)
    acked = values(b)
    survivor = store.crash()  # what the disk holds if the power went now
    with brook.Broker(survivor) as again:
        assert values(again) == acked
    b.close()


def test_time_retention_removes_old_segments_only(tmp_path: Path) -> None:
    now = [1_000_000.0]
    passing = Clock(wall=lambda: now[0], monotonic=lambda: now[0])  # time really passes
    with brook.open(str(tmp_path), segment_bytes_max=300, clock=passing) as b:
        b.create_topic("t", retention_ms=60_000)
        fill(b, 30)
        now[0] += 120
        fill(b, 30)
        b.core.run_maintenance()
        start = b.topic("t").start_offsets()[0]
        assert 0 < start <= 30
        assert b.topic("t").read(0, 0, 1)[0].offset == start
        assert b.topic("t").end_offsets() == {0: 60}


def test_size_retention_keeps_the_newest_bytes(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), segment_bytes_max=300) as b:
        b.create_topic("t", retention_bytes=1000)
        fill(b, 200)
        b.core.run_maintenance()
        sealed = segment_files(tmp_path)[:-1]
        assert sum(f.stat().st_size for f in sealed) < 1000 + 400
        got = b.topic("t").read(0, 0, 1000)
        assert got[-1].offset == 199 and got[0].offset > 0


def test_preallocated_space_is_not_data_and_is_trimmed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    b = brook.open(str(tmp_path), preallocate_bytes=1 << 20)
    fill(b, 30)
    active = segment_files(tmp_path)[-1]
    assert active.stat().st_size > 30 * 10, "space is reserved ahead of the data"
    # Simulate a crash: the reserved zero tail is still on disk when the broker reopens.
    data_end = b.core.topic_state("t").logs[0].segments[-1].durable_bytes
    b.core.committer.close()
    with caplog.at_level(logging.WARNING, logger="brook.log"):
        b2_storage_dir = str(tmp_path)
        b.storage.close()
        with brook.open(b2_storage_dir, preallocate_bytes=1 << 20) as again:
            assert values(again) == [f"v{i}".encode() for i in range(30)]
            again.topic("t").append(b"more")
        assert "dropped" not in caplog.text, "a zero tail is free space, not damage"
    assert active.stat().st_size == data_end + len(b"more") + 48 + 8, (
        "close trims the reserved tail"
    )


def test_a_read_racing_retention_reads_from_what_is_retained(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), segment_bytes_max=300) as b:
        b.create_topic("t", retention_bytes=600)
        fill(b, 100)
        partition = b.core.topic_state("t").logs[0]
        stale = partition.segments  # a reader's snapshot, taken before retention runs
        b.core.run_maintenance()
        assert partition.segments[0] is not stale[0]
        got = partition.read(0, 10)
        assert got and got[0].offset == partition.start_offset
