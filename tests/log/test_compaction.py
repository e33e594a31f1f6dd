"""Compaction keeps the latest record of each key, at its original offset."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import brook
from brook.codec import scan_batches
from brook.log.compaction import LatestOffsets, survivors
from brook.records import Record


def all_records(b: brook.Broker, topic: str = "c") -> list[Record]:
    out: list[Record] = []
    while True:
        got = b.topic(topic).read(0, out[-1].offset + 1 if out else 0, 1000)
        if not got:
            return out
        out.extend(got)


def test_compaction_keeps_the_latest_per_key_and_every_offset(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), segment_bytes_max=400) as b:
        b.create_topic("c", compaction=True)
        t = b.topic("c")
        acks = {}
        for i in range(120):
            key = f"k{i % 5}".encode()
            acks[i] = t.append(f"v{i}".encode(), key=key if i % 7 else None)
        before = all_records(b)
        b.core.run_maintenance()
        after = all_records(b)
        state = b.core.topic_state("c").logs[0]
        sealed_end = state.segments[-1].base_offset
        newest: dict[bytes, int] = {}
        for r in before:
            if r.key is not None:
                newest[r.key] = r.offset
        expected = [
            r
            for r in before
            if r.offset >= sealed_end or r.key is None or newest[r.key] == r.offset
        ]
        assert [(r.offset, r.value, r.key, r.timestamp) for r in after] == [
            (r.offset, r.value, r.key, r.timestamp) for r in expected
        ]
        assert len(after) < len(before)
        assert t.end_offsets() == {0: 120}
        for i, ack in acks.items():
            if i % 7 == 0:
                assert t.read(0, ack.offset, 1)[0].value == f"v{i}".encode(), "unkeyed records stay"
    with brook.open(str(tmp_path), segment_bytes_max=400) as b:
        assert [r.offset for r in all_records(b)] == [r.offset for r in expected], (
            "survives reopening"
        )
        consumer = b.consumer("c", "g")
        polled = consumer.poll(max_records=1000, timeout=0)
        assert [r.offset for r in polled] == [r.offset for r in expected]


def test_reading_from_a_compacted_gap_moves_on(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), segment_bytes_max=300) as b:
        b.create_topic("c", compaction=True)
        t = b.topic("c")
        for i in range(60):
            t.append(b"same-key-%d" % i, key=b"k")
        b.core.run_maintenance()
        got = t.read(0, 0, 10)
        assert got and got[0].offset >= b.core.topic_state("c").logs[0].segments[-1].base_offset


def test_compacting_again_reads_the_gaps_the_first_left(tmp_path: Path) -> None:
    """A compacted segment has gaps between its batches; every reader must step over them."""
    with brook.open(str(tmp_path), segment_bytes_max=400) as b:
        b.create_topic("c", compaction=True)
        t = b.topic("c")
        for rewrite in (b"v", b"w"):
            for i in range(60):  # unique keys survive between superseded ones: gaps
                t.append(rewrite + b"%d" % i, key=b"dup" if i % 2 else b"u%d" % i)
            b.core.run_maintenance()
        survivors = all_records(b)
        assert [r.value for r in survivors[:3]] == [b"w0", b"w2", b"w4"]
        partition_log = b.core.topic_state("c").logs[0]
        body, _ = partition_log.read_batches(0, 1000)
        assert not [item for item in scan_batches(body, 0, None) if isinstance(item, str)], (
            "the stored batches a remote client receives scan cleanly"
        )


@given(
    st.lists(st.tuples(st.sampled_from([None, b"a", b"b", b"c"]), st.integers(0, 3)), max_size=40)
)
def test_survivors_drop_exactly_the_superseded(items: list[tuple[bytes | None, int]]) -> None:
    batches = []
    offset = 0
    latest: dict[bytes, int] = {}
    for batch_index in range(0, len(items), 5):
        chunk = items[batch_index : batch_index + 5]
        records = []
        for key, _ in chunk:
            records.append(Record(b"v", key=key, offset=offset))
            if key is not None:
                latest[key] = offset
            offset += 1
        batches.append((batch_index, records, [None] * len(records)))
    newest = LatestOffsets(keys_max=10)
    for batch in batches:
        for record in batch[1]:
            if record.key is not None:
                newest.add(record.key, record.offset)
    runs, dropped = survivors(batches, newest)
    kept = [r.offset for run in runs for r in run.records]
    want = [i for i, (key, _) in enumerate(items) if key is None or latest[key] == i]
    assert kept == want and dropped == len(items) - len(want)
    for run in runs:
        offsets = [r.offset for r in run.records]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "a run is consecutive"
