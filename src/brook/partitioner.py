"""Which partition a record goes to.

Keyed records: CRC32C (Castagnoli) of the key bytes, modulo the partition count.
It is stable across processes, versions and languages (any CRC32C library gives
the same number), so producers elsewhere can compute it too. Records without a
key are spread round-robin, one call at a time, so an append_many of unkeyed
records stays one batch in one partition.
"""

from __future__ import annotations

import itertools

import crc32c


def partition_for_key(key: bytes, partitions: int) -> int:
    return int(crc32c.crc32c(key)) % partitions


class RoundRobin:
    """Thread-safe enough: itertools.count.__next__ is atomic under the GIL."""

    def __init__(self) -> None:
        self._counter = itertools.count()

    def next(self, partitions: int) -> int:
        return next(self._counter) % partitions
