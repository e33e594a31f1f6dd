"""A topic as one table: its lake's Parquet files, then the records not in them yet.

`brook.spark.table(spark, location, topic)` gives the rows `spark.read.format("brook")`
gives (the same columns; each retained offset exactly once), planned from one look at
the storage: the lake's manifest says where its files end in each partition, and the
log where it starts and ends. Offsets from the log's start to the lake's end are read
from the files, the rest through the `brook` source; both are cut at the same
offsets, so a record the lake holds is never read twice, and one retention already
deleted from the log is never read from the lake.

On a local directory the files are read by Spark's own Parquet reader (statistics on
`offset` and `timestamp` skip files and row groups under a filter). On S3 they are read
by the `brook_lake` source in Spark's Python workers, with pyarrow's Parquet reader
(Spark's own reader needs hadoop-aws on its classpath for s3a://, which a
pip-installed PySpark does not have); the files are plain objects under the
prefix's `lake/`, so a Spark with s3a can read them as well.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from brook import layout, validate
from brook.errors import BadRequest
from brook.lake import manifest as manifests
from brook.lake.arrow import SCHEMA, SPARK_SCHEMA
from brook.lake.history import HISTORY_SCHEMA, HISTORY_SPARK_SCHEMA
from brook.lake.status import read_manifest
from brook.log.view import TopicView
from brook.spark.jobs import read_topic
from brook.spark.options import storage_options_of
from brook.storage import location as locations

COLUMNS = ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]
FILE_SPARK_SCHEMA = SPARK_SCHEMA.removeprefix("topic string, ")
"""The lake files' columns, given to Spark's reader (no footer read to infer them)."""


class Planned(NamedTuple):
    files: list[manifests.LakeFile]
    """The lake files holding offsets to read."""
    start: dict[int, int]
    """Per partition: the log's first retained offset."""
    cut: dict[int, int]
    """Per partition: where the lake's files stop and the brook source starts."""
    end: dict[int, int]
    """Per partition: the log's end when planned."""


def plan(location: str, topic: str, storage_options: dict[str, str] | None = None) -> Planned:
    """Where each partition is read from, from one look at the storage (`storage_options`
    as a `brook` read takes them: endpointUrl, region)."""
    storage = locations.open_reader(location, storage_options_of(storage_options))
    try:
        view = TopicView(storage, topic)
        view.refresh()
        bounds = view.bounds()
        manifest, _ = read_manifest(storage.public(), layout.lake_topic(topic))
    finally:
        storage.close()
    start = {p: low for p, (low, _) in bounds.items()}
    end = {p: high for p, (_, high) in bounds.items()}
    cut = {p: min(max(manifest.end(p) or 0, start[p]), end[p]) for p in bounds}
    files = [
        f
        for f in manifest.files
        if f.partition in cut and f.next > start[f.partition] and f.first < cut[f.partition]
    ]
    return Planned(files, start, cut, end)


def table(
    spark: Any, location: str, topic: str, storage_options: dict[str, str] | None = None
) -> Any:
    """The topic's records as a DataFrame of the `brook` source's columns: the lake's
    files, then the brook source from where they end (docs/SPARK.md, "The lake")."""
    from brook.spark import register

    location = str(location)
    planned = plan(location, topic, storage_options)
    rest = None
    if any(planned.cut[p] < planned.end[p] for p in planned.end):
        register(spark)
        rest = read_topic(
            spark,
            location,
            topic,
            json.dumps({str(p): planned.cut[p] for p in planned.cut}),
            json.dumps({str(p): planned.end[p] for p in planned.end}),
            storage_options,
        )
    read = {p for p in planned.cut if planned.cut[p] > planned.start[p]}
    files = [f for f in planned.files if f.partition in read]
    if not files:
        return rest if rest is not None else spark.createDataFrame([], SPARK_SCHEMA)
    from_lake = _lake_frame(spark, location, topic, planned._replace(files=files), storage_options)
    clauses, whole = [], []
    for p in sorted(read):
        mine = [f for f in files if f.partition == p]
        if mine[0].first >= planned.start[p] and mine[-1].next <= planned.cut[p]:
            whole.append(p)  # every row of these files is to be read
        else:
            clauses.append(
                (F.col("partition") == p)
                & (F.col("offset") >= planned.start[p])
                & (F.col("offset") < planned.cut[p])
            )
    if clauses:
        kept = F.col("partition").isin(whole) if whole else clauses.pop()
        for clause in clauses:
            kept = kept | clause
        from_lake = from_lake.where(kept)
    from_lake = from_lake.select(*COLUMNS)
    return from_lake if rest is None else from_lake.unionByName(rest)


def history(
    spark: Any,
    location: str,
    topic: str | None = None,
    group: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> Any:
    """Queue groups' histories from the lake (of `topic`, of its `group`, or of every
    one): a row per transition, delivery attempts with how each went (columns:
    brook/lake/history.py). Read as the manifests stand when called."""
    location = str(location)
    if group is not None and topic is None:
        raise BadRequest("give the topic of the queue group")
    if locations.parse(location).kind == "local":
        location = str(Path(location).resolve())
    public = locations.open_public(location, storage_options_of(storage_options))
    if group is not None:
        assert topic is not None
        group = validate.topic_name(group, internal=True)  # delivery groups are __endpoint.*
        tables = [layout.lake_history(validate.topic_name(topic), group)]
    else:
        under = (
            layout.lake_histories_of(validate.topic_name(topic))
            if topic is not None
            else layout.LAKE_HISTORIES
        )
        suffix = "/" + layout.LAKE_MANIFEST_FILE
        tables = [
            n.removesuffix(layout.LAKE_MANIFEST_FILE)
            for n in public.list(under)
            if n.endswith(suffix)
        ]
    names = [f.name for t in tables for f in read_manifest(public, t)[0].files]
    if not names:
        return spark.createDataFrame([], HISTORY_SPARK_SCHEMA)
    if locations.parse(location).kind == "local":
        paths = [Path(public.url(name)).as_uri() for name in names]
        return spark.read.schema(HISTORY_SPARK_SCHEMA).parquet(*paths)
    files = [[name, None, None] for name in names]
    return _lake_source(spark, location, None, files, storage_options)


def _lake_frame(
    spark: Any,
    location: str,
    topic: str,
    planned: Planned,
    storage_options: dict[str, str] | None,
) -> Any:
    if locations.parse(location).kind == "local":
        public = locations.open_public(str(Path(location).resolve()))
        paths = [Path(public.url(f.name)).as_uri() for f in planned.files]
        return (
            spark.read.schema(FILE_SPARK_SCHEMA).parquet(*paths).withColumn("topic", F.lit(topic))
        )
    files = [[f.name, planned.start[f.partition], planned.cut[f.partition]] for f in planned.files]
    return _lake_source(spark, location, topic, files, storage_options)


def _lake_source(
    spark: Any,
    location: str,
    topic: str | None,
    files: list[list[Any]],
    storage_options: dict[str, str] | None,
) -> Any:
    """The `brook_lake` source over `files`: [name, first offset, next offset] of a
    topic's files, or with `topic` None [name, None, None] of history files."""
    reader = (
        spark.read.format("brook_lake")
        .option("url", location)
        .option("kind", "topic" if topic is not None else "history")
        .option("files", json.dumps(files))
    )
    if topic is not None:
        reader = reader.option("topic", topic)
    for name, value in (storage_options or {}).items():
        reader = reader.option(name, value)
    return reader.load()


class LakeFileInput(InputPartition):
    def __init__(self, name: str, low: int | None, high: int | None) -> None:
        super().__init__(name)
        self.name, self.low, self.high = name, low, high


class LakeReader(DataSourceReader):
    """Reads lake files (one Spark task each) with pyarrow: one GET each on S3."""

    def __init__(self, options: dict[str, str]) -> None:
        self.location = options["url"]
        self.topic = options.get("topic", "")
        self.history = options.get("kind") == "history"
        self.files: list[list[Any]] = json.loads(options["files"])
        self.storage_options = storage_options_of(
            {k: v for k, v in options.items() if k not in ("url", "topic", "kind", "files")}
        )

    def partitions(self) -> Sequence[InputPartition]:
        return [LakeFileInput(name, low, high) for name, low, high in self.files]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, LakeFileInput):
            return  # Spark's placeholder for a plan of no files
        files = locations.open_public(self.location, self.storage_options)
        found = files.read(partition.name)
        if found is None:
            raise BadRequest(f"lake file {files.url(partition.name)} is gone: plan the table again")
        table = pq.read_table(pa.BufferReader(found[0]))
        if self.history:
            yield from table.cast(HISTORY_SCHEMA).to_batches()
            return
        offsets = table.column("offset")
        keep = pc.and_(pc.greater_equal(offsets, partition.low), pc.less(offsets, partition.high))
        table = table.filter(keep)
        topic = pa.array([self.topic] * table.num_rows, pa.string())
        table = table.select(SCHEMA.names[1:])  # not the typed fields: the source's columns
        yield from table.add_column(0, "topic", topic).cast(SCHEMA).to_batches()


class LakeDataSource(DataSource):
    """`brook_lake`: lake files read with pyarrow in Python workers (for object storage)."""

    @classmethod
    def name(cls) -> str:
        return "brook_lake"

    def schema(self) -> str:
        if self.options.get("kind") == "history":
            return HISTORY_SPARK_SCHEMA
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return LakeReader({k.lower(): v for k, v in self.options.items()})
