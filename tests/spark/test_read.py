"""Batch reads of topics straight from storage, with a real local SparkSession."""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.records import Record
from tests.damage import flip_byte_of
from tests.s3server import MotoServer

pytestmark = pytest.mark.slow


def _records(n: int) -> list[Record]:
    return [
        Record(
            f"value-{i}".encode(),
            key=None if i % 3 == 0 else f"key-{i % 7}".encode(),
            headers={"n": str(i).encode(), "empty": b""} if i % 4 == 0 else None,
        )
        for i in range(n)
    ]


def _load(spark: Any, location: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("brook").option("topic", topic)
    reader = reader.option("url" if location.startswith("s3://") else "path", location)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_a_batch_read_returns_every_column_of_what_was_appended(spark: Any, tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with brook.open(data, segment_bytes_max=1_000) as b:
        b.create_topic("orders", partitions=3)
        acks = b.topic("orders").append_many(_records(500))
        acks += b.topic("orders").append_many(_records(40))
    df = _load(spark, data, "orders")
    assert df.schema.simpleString() == (
        "struct<topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "key:binary,value:binary,headers:map<string,binary>>"
    )
    assert df.rdd.getNumPartitions() > 3  # small segments: one task per segment at least
    rows = {(r.partition, r.offset): r for r in df.collect()}
    expected = _records(500) + _records(40)
    assert len(rows) == len(expected)
    for record, ack in zip(expected, acks, strict=True):
        row = rows[(ack.partition, ack.offset)]
        assert row.topic == "orders"
        assert bytes(row.value) == record.value
        assert (None if row.key is None else bytes(row.key)) == record.key
        assert {k: bytes(v) for k, v in row.headers.items()} == (record.headers or {})
        stamp = row.timestamp.replace(tzinfo=datetime.UTC)
        assert stamp == datetime.datetime.fromtimestamp(ack.timestamp / 1000, datetime.UTC)


def test_offset_ranges_are_inclusive_then_exclusive(spark: Any, tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with brook.open(data, segment_bytes_max=4_000) as b:
        b.create_topic("t", partitions=2)
        for p in (0, 1):
            for _ in range(10):
                b.topic("t").append_many([Record(b"x" * 50) for _ in range(10)], partition=p)

    def offsets(**options: str) -> list[tuple[int, int]]:
        df = _load(spark, data, "t", **options)
        return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())

    assert offsets(startingOffsets='{"0": 5}', endingOffsets='{"0": 8, "1": 2}') == [
        (0, 5),
        (0, 6),
        (0, 7),
        (1, 0),
        (1, 1),
    ]
    every = offsets()
    assert every == [(p, o) for p in (0, 1) for o in range(100)]
    assert offsets(startingOffsets='{"1": 95}', endingOffsets='{"0": 3}') == [
        (0, 0),
        (0, 1),
        (0, 2),
        *[(1, o) for o in range(95, 100)],
    ]
    assert offsets(startingOffsets='{"0": 40, "1": -2}', endingOffsets='{"0": -1, "1": 1}') == [
        *[(0, o) for o in range(40, 100)],
        (1, 0),
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "soon"}, "offsets must be"),
        ({"startingOffsets": '{"7": 1}'}, "partition(s) [7]"),
        ({"endingOffsets": '{"0": 99}'}, "past its end"),
        ({"startingOffsets": "latest"}, "reads nothing"),
        ({"colour": "blue"}, "unknown option"),
    ],
)
def test_bad_options_are_clear_errors(
    spark: Any, tmp_path: Path, options: dict[str, str], message: str
) -> None:
    data = str(tmp_path / "data")
    with brook.open(data) as b:
        b.topic("t").append(b"x")
    with pytest.raises(Exception, match=re.escape(message)):
        _load(spark, data, "t", **options).collect()


def test_a_missing_topic_or_directory_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    with brook.open(str(tmp_path / "data")):
        pass
    with pytest.raises(Exception, match="topic nope does not exist"):
        _load(spark, str(tmp_path / "data"), "nope").collect()
    with pytest.raises(Exception, match="not a directory holding Brook data"):
        _load(spark, str(tmp_path / "none"), "t").collect()


def test_data_deleted_by_retention_follows_fail_on_data_loss(spark: Any, tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with brook.open(data, segment_bytes_max=2_000) as b:
        b.create_topic("t", retention_bytes=6_000)
        for _ in range(20):
            b.topic("t").append_many([Record(b"y" * 100) for _ in range(5)])
        b.core.run_maintenance()
        start = b.topic("t").read(0, 0, 1)[0].offset
    assert start > 0
    with pytest.raises(Exception, match="no longer stored"):
        _load(spark, data, "t", startingOffsets='{"0": 0}').collect()
    rows = _load(spark, data, "t", startingOffsets='{"0": 0}', failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(start, 100))


APPENDER = """
import sys, brook
from brook.records import Record
b = brook.open(sys.argv[1], segment_bytes_max=64_000)
t = b.topic("live")
i = 0
while True:
    n = 1 + i % 37
    acks = t.append_many([Record(str(i + j).encode() * 3) for j in range(n)])
    assert acks[0].offset == i
    i += n
    print(i, flush=True)
"""


def test_reading_while_another_process_appends_sees_only_whole_acked_batches(
    spark: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    child = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(data)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        acked = 0
        while acked < 2_000:
            acked = int(child.stdout.readline())
        for _ in range(3):
            rows = _load(spark, str(data), "live").select("offset", "value").collect()
            offsets = sorted(r.offset for r in rows)
            # Dense from 0, every value the one written at its offset, nothing torn.
            assert offsets == list(range(len(offsets)))
            assert all(bytes(r.value) == str(r.offset).encode() * 3 for r in rows)
            assert len(offsets) >= acked  # at least what was acknowledged before the read
            acked = int(child.stdout.readline())
            time.sleep(0.2)
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()


def test_a_batch_read_from_s3_on_motos_server(spark: Any, moto: MotoServer, tmp_path: Path) -> None:
    url = moto.fresh_url()
    with brook.open(url, endpoint_url=moto.endpoint, cache_dir=str(tmp_path / "cache")) as b:
        b.create_topic("events", partitions=2)
        acks = b.topic("events").append_many(_records(300))
        for _ in range(5):  # several chunks per segment
            acks += b.topic("events").append_many(_records(20))
        df = _load(spark, url, "events", endpoint_url=moto.endpoint)
        rows = {(r.partition, r.offset): bytes(r.value) for r in df.collect()}
    expected = _records(300) + _records(20) * 5
    assert rows == {(a.partition, a.offset): r.value for a, r in zip(acks, expected, strict=True)}


def test_a_damaged_batch_fails_the_read_even_without_fail_on_data_loss(
    spark: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    with brook.open(str(data)) as b:
        b.topic("t").append_many([Record(b"value-%d" % i) for i in range(5)])
    flip_byte_of(data / "topics/t/0/00000000000000000000.seg", b"value-3")
    with pytest.raises(Exception, match="checksum mismatch"):
        _load(spark, str(data), "t", failOnDataLoss="false").collect()


def test_a_compacted_topic_reads_with_its_gaps(spark: Any, tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with brook.open(data, segment_bytes_max=400) as b:
        b.create_topic("c", compaction=True)
        for i in range(120):
            b.topic("c").append(b"v%d" % i, key=b"k%d" % (i % 5))
        b.core.run_maintenance()
        kept = []
        while got := b.topic("c").read(0, kept[-1].offset + 1 if kept else 0, 1000):
            kept.extend(got)
    assert len(kept) < 120  # compaction left gaps
    rows = _load(spark, data, "c").orderBy("offset").collect()
    assert [(r.offset, r.value, r.key) for r in rows] == [(r.offset, r.value, r.key) for r in kept]
    stored = {r.offset for r in kept}
    gap = max(set(range(kept[-1].offset)) - stored)  # an offset compaction removed
    ranged = _load(spark, data, "c", startingOffsets=f'{{"0": {gap}}}').collect()
    assert sorted(r.offset for r in ranged) == [r.offset for r in kept if r.offset >= gap]


def test_a_read_of_no_offsets_is_empty_not_an_error(spark: Any, tmp_path: Path) -> None:
    """A range that holds nothing (starting at the end) plans no slices: Spark then
    reads once with a placeholder, which must yield no rows."""
    data = str(tmp_path / "data")
    with brook.open(data) as b:
        b.create_topic("orders", partitions=2)
        b.topic("orders").append_many(_records(10))
        ends = b.topic("orders").end_offsets()
    starting = "{" + ", ".join(f'"{p}": {o}' for p, o in ends.items()) + "}"
    assert _load(spark, data, "orders", startingOffsets=starting).count() == 0
