"""Offsets of a partition, read from its segments, written as one Parquet file.

A topic's table (below) and a queue group's history (lake/history.py) are written
alike; a `Shape` says what differs: the columns, which have statistics, and which
column the manifest keeps the time range of.

A topic's columns `partition int32, offset int64, timestamp timestamp[us, UTC], key binary,
value binary, headers map<string, binary>` (the Spark source's, less `topic`, which
the file's place names), sorted by offset. Row groups hold about
`limits.lake_row_group_bytes` each, so a scan reads large runs; statistics are kept
for `partition`, `offset` and `timestamp` only, so a filter on offsets or time skips
files and row groups (min/max of values would only bloat the footer). zstd, as
the lake is read far more often than it is written. Any Parquet reader reads the
files: nothing in them is Brook's own.

The file is built in memory and stored with one atomic write, as a public file
(a plain file, or a plain object on S3, outside Brook's catalog): a segment is at
most `segment_bytes_max` (128 MiB by default), and a file is never half there.
"""

from __future__ import annotations

import secrets
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from brook import layout, limits
from brook.errors import CorruptData
from brook.lake.arrow import SCHEMA, to_arrow
from brook.lake.manifest import LakeFile
from brook.log.view import TopicView, read_slice
from brook.storage import PublicFiles, Storage

FILE_SCHEMA = SCHEMA.remove(SCHEMA.get_field_index("topic"))


class Shape(NamedTuple):
    schema: pa.Schema
    statistics: list[str]
    """Columns with min/max statistics (a filter on them skips files and row groups)."""
    time: str
    """The timestamp column whose range the manifest keeps per file."""


RECORDS = Shape(FILE_SCHEMA, ["partition", "offset", "timestamp"], "timestamp")


class Range(NamedTuple):
    partition: int
    first: int
    next: int


def records_table(storage: Storage, view: TopicView, wanted: Range) -> pa.Table:
    """The records of `wanted` as a table of FILE_SCHEMA, in offset order."""
    pieces = view.slices({wanted.partition: wanted.first}, {wanted.partition: wanted.next})
    batches = []
    for piece in pieces:
        for window, found in read_slice(storage, piece):
            batch = to_arrow(
                window, found, view.topic, piece.partition, piece.start_offset, piece.end_offset
            )
            batches.append(batch.drop_columns(["topic"]))
    return pa.Table.from_batches(batches, schema=FILE_SCHEMA)


def encode(table: pa.Table, shape: Shape = RECORDS) -> bytes:
    """The table as Parquet bytes."""
    rows = table.num_rows
    per_row = max(1, table.nbytes // max(rows, 1))
    row_group = max(1, min(rows, limits.lake_row_group_bytes // per_row))
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        row_group_size=row_group,
        compression="zstd",
        write_statistics=shape.statistics,
    )
    data: bytes = sink.getvalue().to_pybytes()
    return data


def store(
    files: PublicFiles, prefix: str, wanted: Range, table: pa.Table, shape: Shape = RECORDS
) -> LakeFile:
    """Store `table` (the rows of `wanted`) as a new file of the lake table at `prefix`."""
    data = encode(table, shape)
    name = layout.lake_file_in(
        prefix, wanted.partition, wanted.first, wanted.next, secrets.token_hex(4)
    )
    files.create(name, data)
    stamps = table.column(shape.time).cast(pa.int64())
    return LakeFile(
        partition=wanted.partition,
        first=wanted.first,
        next=wanted.next,
        name=name,
        rows=table.num_rows,
        bytes=len(data),
        min_timestamp_ms=int(pc.min(stamps).as_py()) // 1000,
        max_timestamp_ms=int(pc.max(stamps).as_py()) // 1000,
    )


def merge(files: PublicFiles, prefix: str, run: list[LakeFile], shape: Shape = RECORDS) -> LakeFile:
    """One file holding every row of `run` (consecutive files of one partition)."""
    tables = [pq.read_table(pa.BufferReader(read(files, f.name))) for f in run]
    table = pa.concat_tables(tables).cast(shape.schema)
    wanted = Range(run[0].partition, run[0].first, run[-1].next)
    return store(files, prefix, wanted, table, shape)


def read(files: PublicFiles, name: str) -> bytes:
    """A lake file's bytes. Raises CorruptData when the manifest names a missing file."""
    found = files.read(name)
    if found is None:
        raise CorruptData(f"lake file {files.url(name)}, named by its manifest, is missing")
    return found[0]
