"""Writing DataFrames to a topic: `df.write.format("brook")` and `writeStream`.

Rows become records (`value` required; `key`, `headers`, `partition` optional)
appended through a running broker (`url=http://...`) or an embedded one
(`path=DIR`). Every record carries an idempotency key naming its row:

- a batch write: the write's id (fixed when Spark plans it), the task's
  partition and the row's position in it, so a retried task appends nothing twice;
- a stream: the query's id (kept in its checkpoint), the micro-batch id, the
  task's partition and the row's position, so a micro-batch replayed after a
  failure appends nothing twice. That is exactly-once per micro-batch as long
  as the replay comes within the broker's idempotency window (default 10
  minutes) and the input of a replayed micro-batch is the same rows in the same
  tasks, which holds for replayable sources such as brook and Kafka.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, LongType, MapType, StringType, StructType

import brook
from brook.errors import BadRequest, Locked
from brook.records import Record
from brook.spark.options import WriteOptions, write_options

ROWS_PER_APPEND = 5_000
BYTES_PER_APPEND = 4 * 1024 * 1024
"""An append is sent once it holds this many rows or bytes."""
LOCKED_WAIT_S = 120.0
"""How long a task waits for the directory while other tasks hold the embedded broker."""

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


class Written(WriterCommitMessage):
    """What one task appended (or found appended already, on a replay)."""

    def __init__(self, rows: int) -> None:
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


class _Target:
    """Where a task appends: a running broker, or an embedded one taken in turn."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        if options.url is not None:
            self.broker: Any = brook.connect(options.url, api_key=options.api_key)
            return
        assert options.path is not None
        deadline = time.monotonic() + LOCKED_WAIT_S
        while True:
            try:
                self.broker = brook.open(options.path)
                return
            except Locked:
                if time.monotonic() > deadline:
                    raise Locked(
                        f"{options.path} stayed locked for {LOCKED_WAIT_S:.0f} s: a broker "
                        "serving it? write through it with url=http://..."
                    ) from None
                time.sleep(0.05)

    def close(self) -> None:
        self.broker.close()


def write_rows(options: WriteOptions, batches: Iterator[pa.RecordBatch], row_id: str) -> Written:
    """Append every row; row i's idempotency key names `row_id` and i. Returns the count."""
    target = _Target(options)
    try:
        topic = target.broker.topic(options.topic)
        pending: dict[int | None, tuple[list[Record], list[bytes]]] = {}
        size = rows = 0

        def flush() -> None:
            nonlocal size
            for partition, (records, keys) in pending.items():
                topic.append_many(records, keys, partition=partition)
            pending.clear()
            size = 0

        for batch in batches:
            for record, partition in rows_to_records(batch):
                key = hashlib.blake2b(f"{row_id}:{rows}".encode(), digest_size=16).digest()
                records, keys = pending.setdefault(partition, ([], []))
                records.append(record)
                keys.append(key)
                rows += 1
                size += len(record.value) + len(record.key or b"")
                if len(records) >= ROWS_PER_APPEND or size >= BYTES_PER_APPEND:
                    flush()
        flush()
        return Written(rows)
    finally:
        target.close()


def _task() -> TaskContext:
    context = TaskContext.get()
    assert context is not None, "write() runs in a Spark task"
    return context


class BrookWriter(DataSourceArrowWriter):
    """A batch write; a retried task finds its rows appended already."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise BadRequest('brook topics are append-only: use mode("append")')
        check_schema(schema)
        self.options = write_options(options)
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return write_rows(self.options, iterator, f"{self.write_id}:{_task().partitionId()}")

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: each row was durable before its task ended."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: rows appended stay (a topic is append-only); a retry adds no copies."""


class BrookStreamWriter(DataSourceStreamArrowWriter):
    """A streaming sink, exactly-once per micro-batch (see the module's docstring)."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        check_schema(schema)
        self.options = write_options(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        context = _task()
        query = context.getLocalProperty("sql.streaming.queryId")
        batch = context.getLocalProperty("streaming.sql.batchId")
        if query is None or batch is None:
            raise BadRequest("the brook stream writer runs only inside a streaming query")
        return write_rows(self.options, iterator, f"{query}:{batch}:{context.partitionId()}")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: each row was durable before its task ended."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: a replay of the micro-batch appends only rows not yet appended."""
