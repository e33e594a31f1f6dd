"""Writing DataFrames to topics: batch and streaming, embedded and through a server."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

import brook
from brook.records import Record
from tests.served import Served
from tests.spark.failing import FailOnceSource

pytestmark = pytest.mark.slow

ROWS = [
    (
        f"v{i}".encode(),
        None if i % 2 else f"k{i % 5}",
        {"i": str(i).encode()} if i % 3 else None,
        i % 3 if i % 4 else None,
    )
    for i in range(60)
]
SCHEMA = "value binary, key string, headers map<string,binary>, partition int"


def _read_all(b: Any, topic: str) -> dict[bytes, tuple[int, bytes | None, dict[str, bytes]]]:
    out = {}
    for p, end in b.topic(topic).end_offsets().items():
        offset = 0
        while offset < end:
            records = b.topic(topic).read(p, offset, 1000)
            for r in records:
                assert r.value not in out, f"{r.value!r} appended twice"
                out[r.value] = (p, r.key, r.headers or {})
            offset = records[-1].offset + 1
    return out


@pytest.mark.parametrize("target", ["path", "url"])
def test_a_batch_write_appends_every_row_with_its_columns(
    spark: Any, tmp_path: Path, target: str
) -> None:
    data = tmp_path / "data"
    with brook.open(str(data)) as b:
        b.create_topic("out", partitions=3)
    server = Served(data) if target == "url" else None
    location = f"http://127.0.0.1:{server.port}" if server else str(data)
    try:
        df = spark.createDataFrame(ROWS, SCHEMA).repartition(2)
        df.write.format("brook").mode("append").option(target, location).option(
            "topic", "out"
        ).save()
    finally:
        if server is not None:
            server.close()
    with brook.open(str(data)) as b:
        stored = _read_all(b, "out")
    assert len(stored) == len(ROWS)
    for value, key, headers, partition in ROWS:
        p, stored_key, stored_headers = stored[value]
        assert stored_key == (None if key is None else key.encode())
        assert stored_headers == (headers or {})
        if partition is not None:
            assert p == partition
        elif key is not None:
            assert p == brook.partitioner.partition_for_key(key.encode(), 3)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda s: s.createDataFrame([(b"x", 1)], "value binary, colour int"), "colour"),
        (lambda s: s.createDataFrame([(b"x",)], "body binary"), "value"),
        (lambda s: s.createDataFrame([(1,)], "value int"), "value has type int"),
    ],
)
def test_a_dataframe_the_sink_cannot_write_is_refused_clearly(
    spark: Any, tmp_path: Path, make: Any, message: str
) -> None:
    with pytest.raises(Exception, match=message):
        make(spark).write.format("brook").mode("append").option("path", str(tmp_path)).option(
            "topic", "out"
        ).save()


def test_overwrite_is_refused(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(b"x",)], "value binary")
    with pytest.raises(Exception, match="append-only"):
        df.write.format("brook").mode("overwrite").option("path", str(tmp_path)).option(
            "topic", "out"
        ).save()


def test_a_replayed_micro_batch_appends_nothing_twice(spark: Any, tmp_path: Path) -> None:
    source, sink = tmp_path / "source", tmp_path / "sink"
    with brook.open(str(source)) as b:
        b.create_topic("in", partitions=2)
        for i in range(0, 500, 25):
            b.topic("in").append_many(
                [Record(f"{i + j}".encode()) for j in range(25)], partition=(i // 25) % 2
            )
    server = Served(sink)
    spark.dataSource.register(FailOnceSource)
    checkpoint = str(tmp_path / "checkpoint")

    def run(format_name: str) -> Any:
        query = (
            spark.readStream.format("brook")
            .option("path", str(source))
            .option("topic", "in")
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", "200")
            .load()
            .select("value")
            .writeStream.format(format_name)
            .option("url", f"http://127.0.0.1:{server.port}")
            .option("topic", "out")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        with contextlib.suppress(StreamingQueryException):
            query.awaitTermination(120)  # raises what the query failed with
        return query

    try:
        failed = run("brook_fail_once")
        assert "injected: micro-batch 0 appended, not committed" in str(failed.exception())
        client = brook.connect(f"http://127.0.0.1:{server.port}")
        assert sum(client.topic("out").end_offsets().values()) == 200  # appended, then failed
        finished = run("brook")
        assert finished.exception() is None
        stored = _read_all(client, "out")
        client.close()
    finally:
        server.close()
    assert sorted(stored, key=int) == [str(i).encode() for i in range(500)]
