"""`brook.spark.table`: the lake's files and the brook source, cut at the manifest's
offsets, give exactly the rows `format("brook")` gives (a real local SparkSession)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import brook
import brook.spark
from brook import limits
from tests.s3server import MotoServer

pytestmark = pytest.mark.slow


def fill(b: brook.Broker, batches: int) -> None:
    for i in range(batches):
        b.topic("orders").append_many(
            [
                brook.Record(
                    f"order {i}-{j}".encode() * 4,
                    key=None if j % 5 == 0 else f"customer-{j % 9}".encode(),
                    headers={"n": str(j).encode()} if j % 4 == 0 else None,
                )
                for j in range(30)
            ]
        )


def rows(df: Any) -> Counter[tuple[Any, ...]]:
    return Counter(
        (
            r.topic,
            r.partition,
            r.offset,
            r.timestamp,
            None if r.key is None else bytes(r.key),
            bytes(r.value),
            tuple(sorted((k, bytes(v)) for k, v in (r.headers or {}).items())),
        )
        for r in df.collect()
    )


def source(spark: Any, location: str, **options: str) -> Any:
    reader = spark.read.format("brook").option("topic", "orders")
    reader = reader.option("url" if location.startswith("s3://") else "path", location)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def lagging_lake_with_retention(b: brook.Broker, **settings: Any) -> None:
    """Many sealed segments, retention past the oldest, a lake that stops short of
    the sealed segments written after its sync, and an active tail."""
    b.create_topic("orders", partitions=2, retention_bytes=8_000, **settings)
    fill(b, 20)
    b.core.run_maintenance()
    b.lake_sync()
    fill(b, 6)  # sealed and active segments the lake does not hold yet


def test_the_table_is_the_source_on_local_disk(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Compared with the broker closed: its periodic retention (every 10 s) would move
    # the log's start between the two reads.
    monkeypatch.setattr(limits, "lake_merge_files", 1_000)  # a file per segment
    data = str(tmp_path / "data")
    with brook.open(data, lake=True, lake_lag_ms=3_600_000, segment_bytes_max=4_000) as b:
        lagging_lake_with_retention(b)
        starts = {p.partition: p.start_offset for p in b.partitions("orders")}
        ends = b.topic("orders").end_offsets()
        assert all(s > 0 for s in starts.values())  # retention deleted the oldest
        status = b.lake_status("orders")[0]
        assert status.files > 2 and status.pending > 0  # the lake lags
    table = brook.spark.table(spark, data, "orders")
    assert table.schema == source(spark, data).schema
    expected = rows(source(spark, data))
    assert rows(table) == expected and len(expected) == sum(e - starts[p] for p, e in ends.items())
    with brook.open(data, lake=True, lake_lag_ms=3_600_000, segment_bytes_max=4_000) as b:
        b.core.run_maintenance()  # more retention after the lake's files were written
        assert b.partitions("orders")[0].start_offset > starts[0]
    assert rows(brook.spark.table(spark, data, "orders")) == rows(source(spark, data))
    filtered = brook.spark.table(spark, data, "orders").where("`offset` >= 300")
    assert rows(filtered) == rows(source(spark, data).where("`offset` >= 300"))


def test_the_table_is_the_source_on_s3(spark: Any, moto: MotoServer, tmp_path: Path) -> None:
    url = moto.fresh_url()
    with brook.open(
        url,
        endpoint_url=moto.endpoint,
        cache_dir=str(tmp_path / "cache"),
        lake=True,
        lake_lag_ms=3_600_000,
        segment_bytes_max=4_000,
    ) as b:
        # With typed columns in its files, which the table leaves out (the source's columns).
        lagging_lake_with_retention(b, value_schema={"type": "object", "properties": {"n": {}}})
    options = {"endpointUrl": moto.endpoint}  # read with the broker closed (as above)
    table = brook.spark.table(spark, url, "orders", options)
    assert rows(table) == rows(source(spark, url, **options))


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_queue_histories_are_read_from_the_lake(
    spark: Any, kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    options: dict[str, Any] = {}
    storage_options: dict[str, str] | None = None
    location = str(tmp_path / "data")
    if kind == "s3":
        moto: MotoServer = request.getfixturevalue("moto")
        location = moto.fresh_url()
        options = {"endpoint_url": moto.endpoint}
        storage_options = {"endpointUrl": moto.endpoint}
    with brook.open(location, lake=True, **options) as b:
        for topic in ("orders", "emails"):
            b.topic(topic).append_many([brook.Record(b"x") for _ in range(4)])
            q = b.queue(topic, "workers", max_attempts=1)
            jobs = q.lease(max_records=4, timeout=0)
            q.nack(jobs[:1], reason=f"{topic}: no such customer")
            q.ack(jobs[1:])
        b.lake_sync()
    everything = brook.spark.history(spark, location, storage_options=storage_options)
    assert everything.count() == 16  # per record: leased, then acked or dead
    dead = brook.spark.history(spark, location, "orders", storage_options=storage_options)
    got = [(r.topic, r.group, r.offset, r.reason) for r in dead.where("state = 'dead'").collect()]
    assert got == [("orders", "workers", 0, "orders: no such customer")]
    one = brook.spark.history(spark, location, "emails", "workers", storage_options=storage_options)
    assert one.where("state = 'dead'").count() == 1
    assert (
        brook.spark.history(spark, location, "none", storage_options=storage_options).count() == 0
    )
