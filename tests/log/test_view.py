"""An outside reader's view of a topic: only acknowledged batches, never a torn one."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brook
from brook.codec.batch import Columns
from brook.codec.segment import DurableMark, decode_durable_mark, encode_durable_mark
from brook.errors import BadRequest, CorruptData, TopicNotFound
from brook.log.partition import LogSettings, PartitionLog
from brook.log.view import TopicView, read_slice
from brook.records import Record
from brook.storage.local import LocalStorage
from brook.storage.location import open_reader
from tests.damage import flip_byte_of
from tests.s3server import MotoServer


def _offsets(view: TopicView, start: int = 0) -> list[int]:
    bounds = view.bounds()
    slices = view.slices({p: start for p in bounds}, {p: hi for p, (_, hi) in bounds.items()}, 500)
    out = []
    for piece in slices:
        for _, batches in read_slice(view.storage, piece):
            for _, header in batches:
                first = max(header.base_offset, piece.start_offset)
                out.extend(range(first, min(header.next_offset, piece.end_offset)))
    return out


def test_the_view_reads_what_was_acknowledged_across_segments(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), segment_bytes_max=1_000) as b:
        for i in range(30):
            b.topic("t").append_many([Record(b"%d" % i * 20) for _ in range(7)])
        view = TopicView(open_reader(str(tmp_path)), "t")
        assert view.bounds() == {0: (0, 210)}
        assert _offsets(view) == list(range(210))
        assert _offsets(view, 99) == list(range(99, 210))
        b.topic("t").append(b"more")
        assert view.bounds() == {0: (0, 211)}  # a growing segment is read on from where it was


def test_offsets_at_a_time_are_the_first_written_then_or_later(tmp_path: Path) -> None:
    now = [1_000.0]
    with brook.open(str(tmp_path), segment_bytes_max=500, clock=lambda: now[0]) as b:
        b.create_topic("t", partitions=2)
        for second in (0, 1, 2, 3, 1.5, 5):  # the clock steps back once
            now[0] = 1_000 + second
            for p in (0, 1):
                b.topic("t").append_many([Record(b"x" * 30)] * 5, partition=p)
        view = TopicView(open_reader(str(tmp_path)), "t")
        assert view.offsets_at(0) == {0: 0, 1: 0}
        assert view.offsets_at(1_001_000) == {0: 5, 1: 5}
        assert view.offsets_at(1_001_500) == {0: 10, 1: 10}  # the batch at 2 s comes first
        assert view.offsets_at(1_004_000) == {0: 25, 1: 25}
        assert view.offsets_at(1_009_000) == {0: 30, 1: 30}  # none so late: the end


def test_batches_written_but_not_yet_synced_are_not_seen(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    storage.write_atomic("topics/t/topic.json", b'{"partitions": 1}')
    log = PartitionLog.open(storage, "t", 0, LogSettings(), 0)
    written = log.append([Columns([b"a", b"b"])], 1)
    log.sync()
    log.publish(written)
    log.append([Columns([b"c"])], 2)  # in the file (the page cache), not acknowledged
    view = TopicView(open_reader(str(tmp_path)), "t")
    assert view.bounds() == {0: (0, 2)}
    assert _offsets(view) == [0, 1]
    log.fail()  # the broker cuts it back: a reader that had seen it would have lied
    log.close()


def test_a_segment_without_a_durable_mark_reads_its_whole_batches(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        b.topic("t").append_many([Record(b"x")] * 5)
    (tmp_path / "topics/t/0/durable.mark").unlink()
    view = TopicView(open_reader(str(tmp_path)), "t")
    assert view.bounds() == {0: (0, 5)}


def test_a_damaged_batch_is_reported_never_served(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        b.topic("t").append_many([Record(b"value-%d" % i) for i in range(5)])
    flip_byte_of(tmp_path / "topics/t/0/00000000000000000000.seg", b"value-3")
    view = TopicView(open_reader(str(tmp_path)), "t")
    with pytest.raises(CorruptData, match="checksum mismatch"):
        _offsets(view)


def test_unreadable_locations_and_topics_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="not a directory"):
        open_reader(str(tmp_path / "missing"))
    with pytest.raises(BadRequest, match="inside one process"):
        open_reader("memory://")
    with pytest.raises(TopicNotFound):
        TopicView(open_reader(str(tmp_path)), "t")


@given(st.integers(0, 2**63), st.integers(0, 2**63), st.integers(0, 2**63), st.integers(0, 35))
def test_a_durable_mark_round_trips_and_any_damage_is_seen(
    base: int, size: int, next_offset: int, flip: int
) -> None:
    mark = DurableMark(base, size, next_offset)
    raw = encode_durable_mark(mark)
    assert decode_durable_mark(raw) == mark
    damaged = bytearray(raw)
    damaged[flip] ^= 0x01
    assert decode_durable_mark(bytes(damaged)) is None
    assert decode_durable_mark(raw[:-1]) is None


class _CountingStorage:
    """A storage whose reads are counted in bytes (as S3 would bill them)."""

    def __init__(self, inner: LocalStorage) -> None:
        self.inner = inner
        self.read_bytes = 0

    def open_read(self, name: str) -> object:
        reader = self.inner.open_read(name)
        outer = self

        class Counted:
            def read(self, position: int, length: int) -> bytes:
                data = reader.read(position, length)
                outer.read_bytes += len(data)
                return data

            def size(self) -> int:
                return reader.size()

            def close(self) -> None:
                reader.close()

        return Counted()


@settings(deadline=None)  # each example writes files: its first can be slow on a busy disk
@given(
    st.lists(st.integers(1, 60), min_size=1, max_size=25),
    st.integers(1, 400),
)
def test_a_slice_is_read_whole_in_any_window_size_and_each_byte_once(
    tmp_path_factory: pytest.TempPathFactory, batch_sizes: list[int], window: int
) -> None:
    folder = tmp_path_factory.mktemp("slices")
    with brook.open(str(folder)) as b:
        for i, size in enumerate(batch_sizes):
            b.topic("t").append_many([Record(b"%d." % i + b"v" * (i % 5)) for _ in range(size)])
    view = TopicView(open_reader(str(folder)), "t")
    (piece,) = view.slices({0: 0}, {0: sum(batch_sizes)}, 10**9)
    counting = _CountingStorage(LocalStorage(folder))
    seen = []
    for _, batches in read_slice(counting, piece, window):  # type: ignore[arg-type]
        for _, header in batches:
            seen.extend(range(header.base_offset, header.next_offset))
    assert seen == list(range(sum(batch_sizes)))
    assert counting.read_bytes == piece.byte_end - piece.byte_start
    view.storage.close()


def test_planning_on_s3_reads_headers_only_and_finds_every_offset(
    moto: MotoServer, tmp_path: Path
) -> None:
    """On S3 the index of an active segment lists a batch per chunk or run; slices, bounds
    and times must come out as from a full index."""
    url = moto.fresh_url()
    now = [1_000.0]
    with brook.open(
        url, endpoint_url=moto.endpoint, cache_dir=str(tmp_path / "c"), clock=lambda: now[0]
    ) as b:
        for _ in range(40):
            now[0] += 1
            b.topic("t").append_many([Record(b"x" * 50)] * 3)
            b.topic("t").append_many([Record(b"y" * 50)] * 2)
    view = TopicView(open_reader(url, {"endpoint_url": moto.endpoint}), "t")
    assert view.bounds() == {0: (0, 200)}
    for ms in (0, 1_001_000, 1_010_000, 1_020_500, 1_040_000, 1_041_000):
        second = (ms - 1_000_000 + 999) // 1000  # the first append made at or after ms
        expected = min(200, max(0, second - 1) * 5)
        assert view.offsets_at(ms) == {0: expected}, ms
    for start in (0, 7, 99, 150):
        assert _offsets(view, start) == list(range(start, 200))
    view.storage.close()
