"""The `brook` data source: topics read as DataFrames, batch and streaming.

Planning (offsets, slices) runs in Spark's driver-side Python workers through a
TopicView; each slice of a segment becomes one Spark task, which reads the
segment straight from storage (a directory or the bucket) and yields Arrow
batches. The broker is never asked: reading cannot slow it, and what a task
can see is only what was acknowledged (brook.log.view).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from brook.errors import BadRequest, CorruptData, DataLoss, StorageError
from brook.lake.arrow import SPARK_SCHEMA, to_arrow
from brook.log.view import SegmentSlice, TopicView, read_slice
from brook.spark.options import AtTime, Offsets, ReadOptions, read_options, resolve
from brook.storage import Storage
from brook.storage.location import open_reader

log = logging.getLogger("brook.spark")


class SliceInput(InputPartition):
    """One Spark task: a slice of one segment, and where to find the storage."""

    def __init__(self, piece: SegmentSlice, options: ReadOptions) -> None:
        super().__init__(piece)
        self.piece = piece
        self.options = options


def read_input(part: SliceInput) -> Iterator[pa.RecordBatch]:
    """The records of one task's slice as Arrow batches (in a Spark task)."""
    piece, options = part.piece, part.options
    storage = open_reader(options.location, options.storage_options)
    try:
        for window, batches in read_slice(storage, piece):
            yield to_arrow(
                window, batches, piece.topic, piece.partition, piece.start_offset, piece.end_offset
            )
    except CorruptData:
        raise  # damage is never skipped, whatever failOnDataLoss says
    except StorageError as exc:
        if not _deleted(storage, piece.name):
            raise  # the storage failed (it may be back on Spark's retry of the task)
        _lost(options, piece.partition, piece.start_offset, piece.end_offset, str(exc))
    finally:
        storage.close()


def _deleted(storage: Storage, name: str) -> bool:
    """Whether a segment is gone from storage (deleted by retention after it was planned)."""
    refresh = getattr(storage, "refresh", None)
    if refresh is not None:
        refresh()  # an attached S3 reader: look at the catalog as it is now
    return name not in storage.list(name.rsplit("/", 1)[0] + "/")


def _lost(options: ReadOptions, partition: int, start: int, end: int, why: str) -> None:
    message = (
        f"topic {options.topic} partition {partition}: offsets {start}..{end - 1} are no longer "
        f"stored ({why}); set failOnDataLoss=false to read on past them"
    )
    if options.fail_on_data_loss:
        raise DataLoss(message)
    log.warning("%s", message)


def _view(options: ReadOptions) -> TopicView:
    return TopicView(open_reader(options.location, options.storage_options), options.topic)


def _offsets(
    view: TopicView, spec: Offsets, bounds: dict[int, tuple[int, int]], missing: str, what: str
) -> dict[int, int]:
    """Offsets per partition from an option: found by time in the log, or resolved."""
    if isinstance(spec, AtTime):
        return view.offsets_at(spec.ms)
    return resolve(spec, bounds, missing, what)


def _check_start(
    options: ReadOptions, start: dict[int, int], bounds: dict[int, tuple[int, int]]
) -> dict[int, int]:
    """Start offsets moved up to the oldest retained, after a DataLoss check."""
    out = {}
    for p, offset in start.items():
        earliest = bounds[p][0]
        if offset < earliest:
            _lost(options, p, offset, earliest, "deleted by retention")
        out[p] = max(offset, earliest)
    return out


class BrookReader(DataSourceReader):
    """A batch read of offsets [startingOffsets, endingOffsets) of every partition."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        view = _view(self.options)
        try:
            bounds = view.bounds()
            start = _offsets(view, self.options.starting, bounds, "earliest", "startingOffsets")
            end = _offsets(view, self.options.ending, bounds, "latest", "endingOffsets")
            for p, (_, latest) in bounds.items():
                if end[p] > latest:
                    raise BadRequest(
                        f"endingOffsets for partition {p} is {end[p]}, past its end {latest}"
                    )
            start = _check_start(self.options, start, bounds)
            slices = view.slices(start, end, self.options.task_bytes_max)
        finally:
            view.storage.close()
        return [SliceInput(piece, self.options) for piece in slices]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SliceInput):
            return iter(())  # Spark's placeholder for a plan of no slices: nothing to read
        return read_input(partition)


class BrookStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream of a topic: offsets per partition live in Spark's checkpoint as
    {"<partition>": next offset}; `maxRecordsPerTrigger` bounds each micro-batch."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._topic_view: TopicView | None = None
        self._target: dict[int, int] | None = None
        """With Trigger.AvailableNow: the ends to stop at, fixed when the query starts."""

    @property
    def view(self) -> TopicView:
        if self._topic_view is None:
            self._topic_view = _view(self.options)
        else:
            self._topic_view.refresh()
        return self._topic_view

    def initialOffset(self) -> dict[str, int]:
        bounds = self.view.bounds()
        start = _offsets(self.view, self.options.starting, bounds, "latest", "startingOffsets")
        return {str(p): o for p, o in start.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        per_trigger = self.options.max_records_per_trigger
        return ReadAllAvailable() if per_trigger is None else ReadMaxRows(per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {p: hi for p, (_, hi) in self.view.bounds().items()}

    def reportLatestOffset(self) -> dict[str, int]:
        return {str(p): hi for p, (_, hi) in self.view.bounds().items()}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        bounds = self.view.bounds()
        begin = {p: int(start.get(str(p), bounds[p][0])) for p in bounds}
        end = {}
        for p, (_, latest) in bounds.items():
            if self._target is not None:
                latest = min(latest, self._target.get(p, latest))
            if latest < begin[p]:
                raise DataLoss(
                    f"topic {self.options.topic} partition {p} ends at offset {latest}, before "
                    f"this query's position {begin[p]}: was the topic deleted and created again?"
                )
            end[p] = latest
        if isinstance(limit, ReadMaxRows):
            end = allot(begin, end, bounds, limit.max_rows)
        return {str(p): o for p, o in end.items()}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        view = self.view
        bounds = view.bounds()
        first = _check_start(self.options, {int(p): o for p, o in start.items()}, bounds)
        last = {int(p): o for p, o in end.items()}
        slices = view.slices(first, last, self.options.task_bytes_max)
        return [SliceInput(piece, self.options) for piece in slices]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SliceInput):
            return iter(())  # Spark's placeholder for a plan of no slices: nothing to read
        return read_input(partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the broker keeps no state for Spark's readers."""

    def stop(self) -> None:
        if self._topic_view is not None:
            self._topic_view.storage.close()


def allot(
    begin: dict[int, int], end: dict[int, int], bounds: dict[int, tuple[int, int]], most: int
) -> dict[int, int]:
    """Ends for one micro-batch of at most `most` records in all, shared between
    partitions in proportion to how far behind each is (as Spark's Kafka source
    does), and never zero in all while any record waits."""
    behind = {p: end[p] - max(begin[p], bounds[p][0]) for p in end}
    total = sum(behind.values())
    if total <= most:
        return end
    share = {p: behind[p] * most // total for p in end}
    spare = most - sum(share.values())
    for p in sorted(end, key=lambda p: -behind[p]):
        extra = min(spare, behind[p] - share[p])
        share[p] += extra
        spare -= extra
    return {p: max(begin[p], bounds[p][0]) + share[p] for p in end}


class BrookDataSource(DataSource):
    """`spark.read.format("brook")`, `readStream`, `write` and `writeStream`."""

    @classmethod
    def name(cls) -> str:
        return "brook"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return BrookReader(read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return BrookStreamReader(read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from brook.spark.sink import BrookWriter

        return BrookWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from brook.spark.sink import BrookStreamWriter

        return BrookStreamWriter(self.options, schema, overwrite)
