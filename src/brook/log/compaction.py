"""Compaction: keep only some records of a segment (the latest of each key, or those
queue groups still need), without changing offsets.

Pure planning here; log/cleaner.py does the reading and the rewrite.
A compacted segment keeps every surviving record at its offset and with its
batch's timestamp: survivors of one original batch are grouped into runs of
consecutive offsets, and each run becomes one batch, so gaps fall between
batches. Records without a key are always kept. An empty value is kept like
any other (Brook has no tombstones).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import NamedTuple

from brook.records import Record

KEY_DIGEST_BYTES = 16
"""A key is held as its BLAKE2b digest of this size: two keys sharing one (which would
drop a record wrongly) are as likely as a random 128-bit collision."""


class Run(NamedTuple):
    """Records at consecutive offsets that share a timestamp: one batch after compaction."""

    timestamp: int
    records: list[Record]
    idempotency_keys: list[bytes | None]


class LatestOffsets:
    """The newest offset of each key seen, in a map of bounded size (after Kafka's
    cleaner's offset map): keys are held as fixed-size digests, so its memory depends
    on how many keys it holds (at most `keys_max`), not on how long they are.

    A record is superseded when the map holds a newer offset for its key; a key the
    map never saw supersedes nothing, so a map that filled up early only means
    that less is dropped this time, never that a record is dropped wrongly.
    """

    def __init__(self, keys_max: int) -> None:
        self.keys_max = keys_max
        self._newest: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._newest)

    def full(self) -> bool:
        return len(self._newest) >= self.keys_max

    def add(self, key: bytes, offset: int) -> bool:
        """Note `key` at `offset` (offsets are added in increasing order); False, noting
        nothing, when the map is full and the key new to it."""
        digest = _digest(key)
        if digest not in self._newest and self.full():
            return False
        self._newest[digest] = offset
        return True

    def superseded(self, record: Record) -> bool:
        if record.key is None:
            return False
        return self._newest.get(_digest(record.key), -1) > record.offset


def _digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=KEY_DIGEST_BYTES).digest()


def survivors(
    batches: list[tuple[int, list[Record], list[bytes | None]]], latest: LatestOffsets
) -> tuple[list[Run], int]:
    """Plan a segment's rewrite. `batches` holds (timestamp, records, idempotency keys)
    per original batch; `latest` knows the newest offset of keys in the partition.

    Returns the runs to write and how many records were dropped.
    """
    return keeping(batches, lambda record: not latest.superseded(record))


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
