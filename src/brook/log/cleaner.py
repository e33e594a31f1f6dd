"""Retention and compaction of one partition: what deletes or rewrites sealed segments.

Both run with the writer role (the committer's maintenance) while nothing is in
flight for the partition, and change it only through `PartitionLog.replace` and
`PartitionLog.drop_oldest`, which retire the old segment: reads already in
progress finish on the old file, later ones start again from the new list.

Compaction (after Kafka's log cleaner) goes segment by segment with a map of
bounded size: a pass first notes the newest offset of every key from where the
last pass stopped (the "dirty" part) until the map is full or the log ends, then
rewrites each sealed segment below that point without the records the map
shows superseded. A partition with more keys than the map holds is compacted
over several passes; one segment is in memory at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from brook import limits
from brook.log import reading
from brook.log.compaction import LatestOffsets, Run, keeping, survivors
from brook.log.files import encode_segment
from brook.log.segment import Segment
from brook.ranges import Ranges
from brook.storage import Storage

log = logging.getLogger("brook.log")


class CleanedLog(Protocol):
    """What retention and compaction need of a partition's log (log/partition.py's
    PartitionLog): its segments, and the two ways to change them."""

    topic: str
    partition: int
    storage: Storage
    clean_offset: int
    """Compaction has looked at every record below this offset."""

    @property
    def segments(self) -> list[Segment]: ...

    def drop_oldest(self) -> None: ...

    def replace(self, index: int, fresh: Segment) -> None: ...


def enforce_retention(
    partition_log: CleanedLog,
    retention_ms: int | None,
    retention_bytes: int | None,
    now_ms: int,
    needed: Callable[[int, int], Ranges] | None = None,
) -> int:
    """Delete the oldest sealed segments past the limits; returns how many.

    `needed(base, next)` names the offsets in a segment that someone (queue groups)
    still needs: such a segment is not deleted, and once at least half of its
    records are no longer needed it is rewritten with only those, at their offsets.
    """
    removed = 0
    index = 0
    while index < len(partition_log.segments) - 1:
        segments = partition_log.segments
        segment = segments[index]
        total = sum(s.durable_bytes for s in segments)
        expired = retention_ms is not None and segment.max_timestamp < now_ms - retention_ms
        oversize = retention_bytes is not None and total - segment.durable_bytes >= retention_bytes
        if not (expired or oversize):
            break
        wanted = needed(segment.base_offset, segment.next_offset) if needed else Ranges()
        if not wanted and index == 0:
            partition_log.drop_oldest()
            removed += 1
            continue
        if wanted:
            _keep_only(partition_log, index, wanted)
        index += 1
    return removed


def _keep_only(partition_log: CleanedLog, index: int, wanted: Ranges) -> None:
    """Rewrite sealed segment `index` with only the `wanted` records, once at least
    half of what it holds is not wanted (so rewrites cost little overall)."""
    segment = partition_log.segments[index]
    if 2 * len(wanted) > segment.next_offset - segment.base_offset:
        return  # cannot be half garbage yet, whatever it holds
    batches = list(reading.decoded_batches(segment, partition_log.topic, partition_log.partition))
    held = sum(len(records) for _, records, _ in batches)
    if 2 * len(wanted) > held:
        return
    runs, dropped = keeping(batches, lambda record: record.offset in wanted)
    _rewrite(partition_log, index, runs)
    log.info(
        "%s: kept %d records still needed by queue groups, dropped %d",
        segment.name,
        held - dropped,
        dropped,
    )


def compact(partition_log: CleanedLog, keys_max: int = limits.compaction_keys_max) -> int:
    """One compaction pass (module docstring); returns how many records it dropped.
    Does nothing until a segment was sealed past where the last pass stopped."""
    sealed = partition_log.segments[:-1]
    if not sealed or sealed[-1].next_offset <= partition_log.clean_offset:
        return 0
    latest, mapped_end = _newest_offsets(partition_log, keys_max)
    dropped_total = 0
    for index, segment in enumerate(sealed):
        if segment.base_offset >= mapped_end:
            break
        batches = list(
            reading.decoded_batches(segment, partition_log.topic, partition_log.partition)
        )
        runs, dropped = survivors(batches, latest)
        if dropped:
            _rewrite(partition_log, index, runs)
            dropped_total += dropped
    partition_log.clean_offset = mapped_end
    return dropped_total


def _newest_offsets(partition_log: CleanedLog, keys_max: int) -> tuple[LatestOffsets, int]:
    """The newest offset of each key from the dirty part on, until the map is full
    or the durable end; and the first offset the map did not see."""
    latest = LatestOffsets(keys_max)
    segments = partition_log.segments
    start = partition_log.clean_offset
    for segment in segments:
        if segment.next_offset <= start:
            continue
        for offset, key in reading.keys_of(segment):
            if offset >= start and not latest.add(key, offset):
                return latest, offset
    return latest, segments[-1].next_offset


def _rewrite(partition_log: CleanedLog, index: int, runs: list[Run]) -> None:
    """Replace sealed segment `index` by one holding `runs`, atomically; reads that
    hold the old segment finish on the old file."""
    segment = partition_log.segments[index]
    data, entries, data_end = encode_segment(partition_log.partition, segment, runs)
    segment.hold_open()  # reads of the old segment keep the old file until it retires
    partition_log.storage.write_atomic(segment.name, data)
    fresh = Segment(
        partition_log.storage,
        segment.name,
        segment.base_offset,
        segment.created_ms,
        entries,
        data_end,
        segment.next_offset,
        sealed=True,
    )
    partition_log.replace(index, fresh)
