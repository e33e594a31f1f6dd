"""Compaction with a bounded key map, and segments retired without leaking a file handle
or breaking a read in progress."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest

import brook
from brook.log import cleaner
from brook.log.segment import Segment, SegmentRetired
from brook.records import Record
from brook.storage.memory import MemoryStorage


def everything(b: brook.Broker, topic: str = "c") -> list[Record]:
    out: list[Record] = []
    while True:
        got = b.topic(topic).read(0, out[-1].offset + 1 if out else 0, 1000)
        if not got:
            return out
        out.extend(got)


@pytest.mark.parametrize("keys_max", [1, 3, 7, 1000])
def test_a_small_key_map_compacts_over_passes_to_what_a_whole_map_would(
    tmp_path: Path, keys_max: int
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    with brook.open(str(tmp_path), segment_bytes_max=300) as b:
        b.create_topic("c", compaction=True)
        t = b.topic("c")
        for i in range(400):
            key = None if rng.random() < 0.1 else b"k%d" % rng.randrange(25)
            t.append(b"v%d" % i, key=key)
        before = everything(b)
        partition_log = b.core.topic_state("c").logs[0]
        sealed_end = partition_log.segments[-1].base_offset
        passes = 0
        while partition_log.clean_offset < sealed_end:
            b.core.call(lambda: cleaner.compact(partition_log, keys_max=keys_max))
            passes += 1
            assert passes <= 400, f"seed {seed}: compaction makes no progress"
        if keys_max < 25:
            assert passes > 1, "a map smaller than the keys takes several passes"
        # The passes mapped keys up to clean_offset: a sealed record goes exactly when
        # a newer one of its key lies below it (later ones wait for the next roll).
        mapped = partition_log.clean_offset
        newest = {r.key: r.offset for r in before if r.key is not None and r.offset < mapped}
        want = [
            r.offset
            for r in before
            if r.offset >= sealed_end or r.key is None or newest.get(r.key, -1) <= r.offset
        ]
        assert [r.offset for r in everything(b)] == want, f"seed {seed}"
        assert t.end_offsets() == {0: 400}


def test_a_retired_segment_closes_its_file_once_the_reads_in_progress_end() -> None:
    storage = MemoryStorage()
    storage.write_atomic("s.seg", b"0123456789")
    segment = Segment(storage, "s.seg", 0, 0, [], 10, 0, sealed=True)
    assert segment.read(2, 5) == b"234"
    segment._pin()  # a read in progress
    segment.retire()
    assert segment._reader is not None, "not closed under a read"
    segment._unpin()
    assert segment._reader is None, "closed once the read ended"
    with pytest.raises(SegmentRetired):
        segment.read(0, 1)


def _open_segment_files(directory: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory) + "/") and ".seg" in target:
            found.append(target)
    return found


def test_reads_go_on_through_compaction_and_retention_and_no_handle_is_left(
    tmp_path: Path,
) -> None:
    failures: list[BaseException] = []
    stop = threading.Event()
    with brook.open(str(tmp_path), segment_bytes_max=400) as b:
        b.create_topic("c", compaction=True, retention_bytes=3000)
        t = b.topic("c")

        def read_all_the_time() -> None:
            while not stop.is_set():
                try:
                    for record in everything(b):
                        assert record.value == b"v%d" % record.offset
                except BaseException as exc:  # reported by the test below
                    failures.append(exc)
                    return

        for i in range(50):
            assert t.append(b"v%d" % i, key=b"k%d" % (i % 4)).offset == i
        readers = [threading.Thread(target=read_all_the_time) for _ in range(3)]
        for reader in readers:
            reader.start()
        for round_ in range(15):
            for i in range(20):
                n = 50 + round_ * 20 + i
                assert t.append(b"v%d" % n, key=b"k%d" % (n % 4)).offset == n
            b.core.run_maintenance()
        stop.set()
        for reader in readers:
            reader.join()
        assert not failures, failures[0]
        live = {s.name for s in b.core.topic_state("c").logs[0].segments}
        held = set(_open_segment_files(tmp_path / "topics" / "c"))
        assert all(any(path.endswith(name) for name in live) for path in held), (
            "no handle is held on a file retention deleted",
            held,
        )
    assert _open_segment_files(tmp_path) == [], "closing the broker closes every segment file"
