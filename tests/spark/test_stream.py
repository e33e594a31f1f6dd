"""Streaming reads: admission control, Trigger.AvailableNow, restarts from a checkpoint."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.records import Record
from tests.waiting import slow

pytestmark = pytest.mark.slow


def _stream(spark: Any, data: Path, topic: str, **options: str) -> Any:
    reader = spark.readStream.format("brook").option("path", str(data)).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _fill(data: Path, topic: str, partitions: int, start: int, count: int) -> None:
    with brook.open(str(data), segment_bytes_max=3_000) as b:
        if topic not in {t.name for t in b.topics()}:
            b.create_topic(topic, partitions=partitions)
        records = [Record(f"{start + i}".encode()) for i in range(count)]
        for i in range(0, count, 50):
            b.topic(topic).append_many(records[i : i + 50], partition=(i // 50) % partitions)


def test_available_now_with_max_records_per_trigger(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _fill(data, "in", 2, 0, 1_000)
    sizes: list[int] = []
    seen: list[str] = []

    def collect(df: Any, batch_id: int) -> None:
        rows = df.collect()
        sizes.append(len(rows))
        seen.extend(bytes(r.value).decode() for r in rows)

    query = (
        _stream(spark, data, "in", startingOffsets="earliest", maxRecordsPerTrigger="300")
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sizes == [300, 300, 300, 100]
    assert sorted(seen, key=int) == [str(i) for i in range(1_000)]


def test_a_stream_starts_at_the_end_by_default(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _fill(data, "in", 1, 0, 100)
    seen: list[int] = []

    def collect(df: Any, batch_id: int) -> None:
        seen.extend(r.offset for r in df.collect())

    query = (
        _stream(spark, data, "in")
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + slow(60)
        while not query.recentProgress and time.monotonic() < deadline:
            time.sleep(0.1)
        _fill(data, "in", 1, 100, 20)
        while len(seen) < 20 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        query.stop()
    assert sorted(seen) == list(range(100, 120))


def test_a_stream_can_start_at_a_time(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    now = [1_000.0]
    with brook.open(str(data), clock=lambda: now[0]) as b:
        b.create_topic("in", partitions=2)
        for second in range(4):
            now[0] = 1_000 + second
            for p in (0, 1):
                b.topic("in").append_many([Record(b"%d" % second)] * 10, partition=p)
    seen: list[bytes] = []
    query = (
        _stream(spark, data, "in", startingTimestamp="1002000")
        .writeStream.foreachBatch(lambda df, _: seen.extend(bytes(r.value) for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(seen) == [b"2"] * 20 + [b"3"] * 20


def test_stop_and_restart_from_the_checkpoint_leaves_no_gap_and_no_duplicate(
    spark: Any, tmp_path: Path
) -> None:
    data, out, checkpoint = tmp_path / "data", tmp_path / "out", tmp_path / "checkpoint"
    _fill(data, "in", 2, 0, 1_000)

    def start(trigger: dict[str, Any]) -> Any:
        return (
            _stream(spark, data, "in", startingOffsets="earliest", maxRecordsPerTrigger="100")
            .select("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )

    query = start({"processingTime": "50 milliseconds"})
    deadline = time.monotonic() + slow(60)
    while len(query.recentProgress) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()
    done = spark.read.parquet(str(out)).count()
    assert 0 < done < 1_000  # stopped part of the way through
    _fill(data, "in", 2, 1_000, 500)
    query = start({"availableNow": True})
    query.awaitTermination(120)
    assert query.exception() is None
    values = [bytes(r.value).decode() for r in spark.read.parquet(str(out)).collect()]
    assert sorted(values, key=int) == [str(i) for i in range(1_500)]
