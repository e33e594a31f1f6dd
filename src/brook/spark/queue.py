"""`brook_queue`: a queue group's records with where each one stands, as a table.

    spark.read.format("brook_queue").option("path", DIR).option("topic", "orders")
        .option("group", "billing").load()

Every record the topic retains, with the columns of a `brook` read and six more:
`state` (ready, leased, retrying, acked, dead), `attempts` (deliveries so far;
null for a record acked before the group's newest snapshot, whose count is no
longer kept), `redrives`, `error` (the last reason given by a nack, a discard or
the death), `due_at` (when a lease ends, or a retry is due) and `changed_at` (its
latest transition, while the status log still holds it).

Planning folds the group's status log once (brook.queue.inspect), straight from
storage like any read, and hands each task the state of the records its slice
covers; the task reads its records like a `brook` read and adds the state
columns with numpy. So the table scales like a topic read and needs no join.
It shows the group as its status log stood when the query was planned.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import msgspec
import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from brook import layout
from brook.errors import CorruptData, NotFound
from brook.lake.arrow import SCHEMA, SPARK_SCHEMA
from brook.log.view import SegmentSlice, TopicView, read_records
from brook.models import State
from brook.queue import status
from brook.queue.inspect import GroupState, Touched, group_state
from brook.queue.lifecycle import JobState
from brook.spark.options import ReadOptions, queue_options
from brook.spark.source import SliceInput, read_input
from brook.storage import Storage
from brook.storage.location import open_reader

_TIME = pa.timestamp("us", tz="UTC")
STATE_SCHEMA = pa.schema(
    [
        ("state", pa.string()),
        ("attempts", pa.int32()),
        ("redrives", pa.int32()),
        ("error", pa.string()),
        ("due_at", _TIME),
        ("changed_at", _TIME),
    ]
)
QUEUE_SCHEMA = pa.schema([*SCHEMA, *STATE_SCHEMA])
QUEUE_SPARK_SCHEMA = (
    f"{SPARK_SCHEMA}, state string, attempts int, redrives int, error string, "
    "due_at timestamp, changed_at timestamp"
)
_Row = list[str | int | None]
_READY_ROW: _Row = [State.READY.value, 0, 0, None, None, None]
_ACKED_ROW: _Row = [State.ACKED.value, None, None, None, None, None]


class Standings(NamedTuple):
    """The state of the records of one slice (plain values and Arrow: it pickles)."""

    floor: int
    """Records below are acked."""
    run_firsts: np.ndarray
    run_stops: np.ndarray
    """Runs [first, stop) of acked records above the floor, in order."""
    offsets: np.ndarray
    """The sorted offsets of the records the status log names."""
    rows: pa.RecordBatch
    """STATE_SCHEMA: a row per offset in `offsets`, then a ready row and an acked row."""


def standings(state: GroupState, pieces: Sequence[SegmentSlice]) -> list[Standings]:
    """What `state` says of the records of each of `pieces` (each found by bisection,
    so planning stays linear in the records touched however many tasks there are)."""
    touched: dict[int, list[tuple[int, Touched]]] = {}
    for (p, o), found in state.touched.items():
        touched.setdefault(p, []).append((o, found))
    for items in touched.values():
        items.sort(key=lambda item: item[0])
    offsets = {p: [o for o, _ in items] for p, items in touched.items()}
    out = []
    for piece in pieces:
        p, start, end = piece.partition, piece.start_offset, piece.end_offset
        known = offsets.get(p, [])
        inside = touched.get(p, [])[bisect_left(known, start) : bisect_left(known, end)]
        runs = state.acked.get(p, [])
        first_run = max(0, bisect_right(runs, (start, start)) - 1)
        runs = [(a, b) for a, b in runs[first_run : bisect_left(runs, (end, end))] if b > start]
        out.append(_standings(state.floor.get(p, 0), runs, inside))
    return out


def _standings(
    floor: int, runs: list[tuple[int, int]], inside: list[tuple[int, Touched]]
) -> Standings:
    rows: list[_Row] = [
        [
            found.job.state.value,
            found.job.attempt,
            found.job.lives,
            found.job.error or None,
            _due_us(found.job),
            None if found.changed is None else found.changed.at_ms * 1000,
        ]
        for _, found in inside
    ]
    rows += [_READY_ROW, _ACKED_ROW]
    columns = list(zip(*rows, strict=True))
    return Standings(
        floor,
        np.array([a for a, _ in runs], np.int64),
        np.array([b for _, b in runs], np.int64),
        np.array([o for o, _ in inside], np.int64),
        pa.RecordBatch.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, STATE_SCHEMA, strict=True)],
            schema=STATE_SCHEMA,
        ),
    )


def _due_us(job: JobState) -> int | None:
    """When a lease ends, or a retry is due (µs), for the states that wait on time."""
    if job.state is State.LEASED:
        return job.lease_until_ms * 1000
    if job.state is State.RETRYING:
        return job.ready_at_ms * 1000
    return None


def with_state(batch: pa.RecordBatch, known: Standings) -> pa.RecordBatch:
    """`batch` (SCHEMA) with the state columns of its records (QUEUE_SCHEMA)."""
    offsets = batch.column("offset").to_numpy()
    count = len(known.offsets)
    at = np.searchsorted(known.offsets, offsets)
    named = at < count
    named[named] = known.offsets[at[named]] == offsets[named]
    acked = offsets < known.floor
    if len(known.run_firsts):
        run = np.searchsorted(known.run_firsts, offsets, side="right") - 1
        acked |= (run >= 0) & (offsets < known.run_stops[np.maximum(run, 0)])
    rows = np.where(named, at, np.where(acked, count + 1, count))
    state = known.rows.take(pa.array(rows))
    return pa.RecordBatch.from_arrays([*batch.columns, *state.columns], schema=QUEUE_SCHEMA)


def read_group_state(storage: Storage, topic: str, group: str) -> GroupState:
    """The group's state from its status log in `storage`. Raises NotFound for a
    group that does not exist, CorruptData, StorageError."""
    if storage.read_all(layout.queue_settings(topic, group)) is None:
        raise NotFound(f"topic {topic} has no queue group {group!r}")
    view = TopicView(storage, layout.queue_status_log(topic, group), partitions=1)
    first, end = view.bounds()[0]
    pieces = view.slices({0: first}, {0: end})
    return group_state(_entries(storage, pieces))


def _entries(storage: Storage, pieces: list[SegmentSlice]) -> Iterator[tuple[int, status.Entry]]:
    for piece in pieces:
        for record in read_records(storage, piece):
            try:
                yield record.offset, status.decode(record.value)
            except msgspec.DecodeError as exc:
                raise CorruptData(
                    f"{piece.name}: status entry at offset {record.offset} does not decode: {exc}"
                ) from None


class QueueInput(SliceInput):
    """One task: a slice of the topic and the state of its records."""

    def __init__(self, piece: SegmentSlice, options: ReadOptions, known: Standings) -> None:
        super().__init__(piece, options)
        self.known = known


class QueueReader(DataSourceReader):
    def __init__(self, options: ReadOptions, group: str) -> None:
        self.options = options
        self.group = group

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        storage = open_reader(options.location, options.storage_options)
        try:
            state = read_group_state(storage, options.topic, self.group)
            view = TopicView(storage, options.topic)
            bounds = view.bounds()
            pieces = view.slices(
                {p: lo for p, (lo, _) in bounds.items()},
                {p: hi for p, (_, hi) in bounds.items()},
                options.task_bytes_max,
            )
        finally:
            storage.close()
        return [
            QueueInput(piece, options, known)
            for piece, known in zip(pieces, standings(state, pieces), strict=True)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueInput)
        for batch in read_input(partition):
            yield with_state(batch, partition.known)


class QueueDataSource(DataSource):
    """`spark.read.format("brook_queue")`: options path or url (and S3 options),
    topic, group."""

    @classmethod
    def name(cls) -> str:
        return "brook_queue"

    def schema(self) -> str:
        return QUEUE_SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        options, group = queue_options(self.options)
        return QueueReader(options, group)
