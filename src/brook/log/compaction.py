"""Compaction: keep only some records of a segment (the latest of each key, or those
queue groups still need), without changing offsets.

Pure planning here; PartitionLog.compact does the reading and the rewrite.
A compacted segment keeps every surviving record at its offset and with its
batch's timestamp: survivors of one original batch are grouped into runs of
consecutive offsets, and each run becomes one batch, so gaps fall between
batches. Records without a key are always kept. An empty value is kept like
any other (Brook has no tombstones).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from brook.records import Record


class Run(NamedTuple):
    """Records at consecutive offsets that share a timestamp: one batch after compaction."""

    timestamp: int
    records: list[Record]
    idempotency_keys: list[bytes | None]


def survivors(
    batches: list[tuple[int, list[Record], list[bytes | None]]], latest: dict[bytes, int]
) -> tuple[list[Run], int]:
    """Plan a segment's rewrite. `batches` holds (timestamp, records, idempotency keys)
    per original batch; `latest` maps each key to its newest offset in the partition.

    Returns the runs to write and how many records were dropped.
    """
    return keeping(
        batches,
        lambda record: record.key is None or latest.get(record.key, record.offset) == record.offset,
    )


def keeping(
    batches: list[tuple[int, list[Record], list[bytes | None]]], keep: Callable[[Record], bool]
) -> tuple[list[Run], int]:
    """Plan a segment's rewrite that keeps only the records `keep` says, at their
    offsets: the runs to write and how many records were dropped."""
    runs: list[Run] = []
    dropped = 0
    for timestamp, records, idem in batches:
        current: Run | None = None
        for record, key in zip(records, idem, strict=True):
            if not keep(record):
                dropped += 1
                current = None
                continue
            if current is None:
                current = Run(timestamp, [], [])
                runs.append(current)
            current.records.append(record)
            current.idempotency_keys.append(key)
    return runs, dropped
