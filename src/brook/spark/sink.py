"""Writing DataFrames to a topic: `df.write.format("brook")` and `writeStream`.

Rows become records (`value` required; `key`, `headers`, `partition` optional)
written through a running broker (`url=http://...`) or an embedded one
(`path=DIR`), exactly once, whatever the order of rows in a task, the
placement of tasks, or how often Spark retries them (docs/SPARK.md):

- each task *stages* its rows under a part id of its own (brook/staging): they
  are durable but not readable yet;
- the driver's commit *publishes* the write (a batch write's id, or the
  query's id and the micro-batch's id) naming the parts of the tasks that
  succeeded; the broker appends exactly those rows, once. A publish repeated
  (a micro-batch replayed after a crash) appends nothing more, and a replayed
  micro-batch's tasks stage nothing once the broker knows it was published.

While the broker cannot be reached (a restart), tasks and the commit wait for
it with backoff for up to `outageWaitMs` before the query fails.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, LongType, MapType, StringType, StructType

import brook
from brook import limits
from brook.errors import BadRequest, BrookError, Locked, StorageError, Unavailable
from brook.records import Record
from brook.retry import doubling, retry_delay
from brook.spark.options import WriteOptions, write_options

_OUTAGE = doubling(limits.sink_outage_pause_ms_min, limits.sink_outage_pause_ms_max)
"""The backoff between tries while the broker cannot be reached."""

log = logging.getLogger("brook.spark")
T = TypeVar("T")

_BYTES_LIKE = (BinaryType, StringType)
_COLUMNS = {
    "value": _BYTES_LIKE,
    "key": _BYTES_LIKE,
    "headers": (MapType,),
    "partition": (IntegerType, LongType),
}


def check_schema(schema: StructType) -> None:
    """Refuse a DataFrame the sink cannot write, before any task runs."""
    names = {field.name.lower(): field for field in schema.fields}
    unknown = sorted(set(names) - set(_COLUMNS))
    if unknown:
        raise BadRequest(
            f"column(s) {unknown} cannot be written to brook: the columns are value "
            "(required), key, headers and partition; select or rename them first"
        )
    if "value" not in names:
        raise BadRequest("writing to brook needs a column named value (binary or string)")
    for name, field in names.items():
        if not isinstance(field.dataType, _COLUMNS[name]):
            raise BadRequest(
                f"column {name} has type {field.dataType.simpleString()}, "
                f"which cannot be written as a record's {name}"
            )
    headers = names.get("headers")
    if headers is not None:
        kind = headers.dataType
        assert isinstance(kind, MapType)
        if not isinstance(kind.keyType, StringType) or not isinstance(kind.valueType, _BYTES_LIKE):
            raise BadRequest("column headers must be map<string, binary> (or map<string, string>)")


class Staged(WriterCommitMessage):
    """What one task staged: its part, how many chunks and rows (none once the
    broker said the write was published already)."""

    def __init__(self, writer: str, part: str, chunks: int, rows: int) -> None:
        self.writer = writer
        self.part = part
        self.chunks = chunks
        self.rows = rows


def _as_bytes(item: bytes | str | None) -> bytes | None:
    return item.encode() if isinstance(item, str) else item


def rows_to_records(batch: pa.RecordBatch) -> Iterator[tuple[Record, int | None]]:
    """Each row as a Record, with the partition it asks for (None: by key)."""
    columns = {
        name.lower(): batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)
    }
    values = columns["value"]
    keys = columns.get("key") or [None] * len(values)
    headers = columns.get("headers") or [None] * len(values)
    partitions = columns.get("partition") or [None] * len(values)
    for row, value in enumerate(values):
        if value is None:
            raise BadRequest("a row has a null value: every record needs a value")
        items = headers[row]
        record_headers = None
        if items:
            record_headers = {name: _as_bytes(v) or b"" for name, v in items}
        yield Record(_as_bytes(value) or b"", _as_bytes(keys[row]), record_headers), partitions[row]


def waiting_out_outages(options: WriteOptions, call: Callable[[], T]) -> T:
    """`call()`, tried again with backoff while the broker cannot be reached or its
    storage fails (a restart, a failover), for up to `outage_wait_ms`. Every call
    the sink makes is safe to repeat."""
    deadline = time.monotonic() + options.outage_wait_ms / 1000
    failures = 0
    while True:
        try:
            return call()
        except (Unavailable, StorageError, Locked) as exc:
            failures += 1
            pause = retry_delay(_OUTAGE, failures) / 1000
            if time.monotonic() + pause > deadline:
                raise type(exc)(
                    f"{exc.message} (waited {options.outage_wait_ms} ms for the broker: "
                    "outageWaitMs)"
                ) from None
            log.warning("brook sink: %s; trying again in %.1f s", exc.message, pause)
            time.sleep(pause)


class _Target:
    """Where a task or the driver writes: a running broker, or an embedded one taken
    in turn (each task holds the directory while it stages)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        if options.url is not None:
            self.broker: Any = brook.connect(options.url, api_key=options.api_key())
            return
        assert options.path is not None
        deadline = time.monotonic() + limits.sink_locked_wait_s
        while True:
            try:
                self.broker = brook.open(options.path)
                return
            except Locked:
                if time.monotonic() > deadline:
                    raise Locked(
                        f"{options.path} stayed locked for {limits.sink_locked_wait_s:.0f} s: a broker "
                        "serving it? write through it with url=http://..."
                    ) from None
                time.sleep(0.05)

    def __enter__(self) -> Any:
        return self.broker.topic(self.options.topic)

    def __exit__(self, *exc: object) -> None:
        self.broker.close()


def stage_rows(
    options: WriteOptions, batches: Iterator[pa.RecordBatch], writer: str, seq: int
) -> Staged:
    """Stage every row under a new part id (chunks of at most limits.sink_chunk_rows rows or
    limits.sink_chunk_bytes bytes, one chunk per partition asked for). Stops early when the
    broker says the write was published already (a replay)."""
    context = _task()
    part = f"{context.partitionId()}-{context.attemptNumber()}-{uuid.uuid4().hex[:12]}"
    pending: dict[int | None, list[Record]] = {}
    sizes: dict[int | None, int] = {}
    chunks = rows = 0
    with _Target(options) as topic:

        def flush(partition: int | None) -> bool:
            nonlocal chunks
            records = pending.pop(partition)
            sizes.pop(partition)
            staged = waiting_out_outages(
                options, lambda: topic.stage(writer, seq, part, chunks, records, partition)
            )
            chunks += 1
            return bool(staged)

        for batch in batches:
            for record, partition in rows_to_records(batch):
                records = pending.setdefault(partition, [])
                records.append(record)
                rows += 1
                sizes[partition] = (
                    sizes.get(partition, 0) + len(record.value) + len(record.key or b"")
                )
                if (
                    len(records) >= limits.sink_chunk_rows
                    or sizes[partition] >= limits.sink_chunk_bytes
                ) and (not flush(partition)):
                    return Staged(writer, part, 0, 0)
        for partition in list(pending):
            if not flush(partition):
                return Staged(writer, part, 0, 0)
    return Staged(writer, part, chunks, rows)


def publish(options: WriteOptions, writer: str, seq: int, messages: Sequence[object]) -> None:
    """Publish the parts the successful tasks staged (on the driver)."""
    parts = {m.part: m.chunks for m in messages if isinstance(m, Staged) and m.chunks}
    if not parts:
        return
    with _Target(options) as topic:
        published = waiting_out_outages(options, lambda: topic.publish(writer, seq, parts))
    log.info(
        "brook sink: %s %d published %s records%s",
        writer,
        seq,
        published.records,
        " (a replay: nothing appended again)" if published.replayed else "",
    )


def _task() -> TaskContext:
    context = TaskContext.get()
    assert context is not None, "write() runs in a Spark task"
    return context


class BrookWriter(DataSourceArrowWriter):
    """A batch write: tasks stage, the commit publishes once; an aborted write's
    staged rows are dropped (and would be swept after staging_ttl_ms anyway)."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise BadRequest('brook topics are append-only: use mode("append")')
        check_schema(schema)
        self.options = write_options(options)
        self.writer = f"write-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Staged:
        return stage_rows(self.options, iterator, self.writer, 0)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        publish(self.options, self.writer, 0, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        with contextlib.suppress(BrookError), _Target(self.options) as topic:
            topic.drop_staged(self.writer, 0)


class BrookStreamWriter(DataSourceStreamArrowWriter):
    """A streaming sink, exactly-once per micro-batch (see the module's docstring):
    the writer is the query's id (kept in its checkpoint), the seq its batch id."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        check_schema(schema)
        self.options = write_options(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Staged:
        context = _task()
        query = context.getLocalProperty("sql.streaming.queryId")
        batch = context.getLocalProperty("streaming.sql.batchId")
        if query is None or batch is None:
            raise BadRequest("the brook stream writer runs only inside a streaming query")
        return stage_rows(self.options, iterator, f"query-{query}", int(batch))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        writers = {m.writer for m in messages if isinstance(m, Staged)}
        assert len(writers) <= 1, f"one micro-batch, one query: {writers}"
        for writer in writers:
            publish(self.options, writer, batchId, messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to drop: a micro-batch is replayed from the checkpoint, and staging
        nobody publishes is swept after staging_ttl_ms."""
