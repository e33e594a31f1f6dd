"""Recovery from the write-ahead log: what it holds past the checkpoint, put back into
the segments before the broker serves (log/wal.py says why that is all it takes).

Each partition's segments were recovered first (log/files.py: whole, checksummed
batches kept, a torn tail cut). Entries are then applied in WAL order:
- an entry wholly below the partition's end is already in its segment (the kernel
  wrote it back before the crash, or a checkpoint did);
- an entry that starts at the end is appended (the crash took it from the page cache),
  and so is the rest of one whose first batches the segment holds;
- an entry that starts past the end (or before it, reaching past it) means the
  segment lost acknowledged records or holds others in their place: CorruptData, and
  the broker does not start on it;
- entries of a topic dropped later (by name, or every log under a name and '/': a
  topic's status logs), or of a topic or partition that no longer exists (deleted
  before the crash), are skipped.
Every partition named past the checkpoint is then synced, since its segment's bytes
may have been in the page cache only, before the new checkpoint lets the WAL go.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

from brook.codec import scan_batches
from brook.codec.wal import KIND_TOPIC_DROPPED, Entry
from brook.errors import CorruptData
from brook.log.partition import PartitionLog

log = logging.getLogger("brook.wal")

FindLog = Callable[[str, int], PartitionLog | None]
"""The open log of (topic, partition), or None when there is none."""


class Replayed(NamedTuple):
    logs: list[PartitionLog]
    """Every partition the entries named: to be synced before the next checkpoint."""
    restored_records: int
    restored_bytes: int


def replay(entries: list[Entry], find_log: FindLog, now_ms: int) -> Replayed:
    """Apply `entries` (in WAL order) to the partitions' logs; see the module."""
    drops = [(i, e.topic) for i, e in enumerate(entries) if e.kind == KIND_TOPIC_DROPPED]
    named: dict[PartitionLog, None] = {}
    records = size = 0
    for i, entry in enumerate(entries):
        if entry.kind == KIND_TOPIC_DROPPED or _dropped_later(entry.topic, i, drops):
            continue
        partition_log = find_log(entry.topic, entry.partition)
        if partition_log is None:
            continue
        named[partition_log] = None
        end = partition_log.next_offset
        if entry.next <= end:
            continue
        body = _from_offset(entry.body, entry.base, end)
        if body is None:
            raise CorruptData(
                f"partition {entry.topic}/{entry.partition} ends at offset {end}, but the "
                f"write-ahead log holds acknowledged records from {entry.base} to "
                f"{entry.next - 1}: the segment lost records it had synced (a failing disk?)"
            )
        partition_log.restore(body, now_ms)
        records += entry.next - end
        size += len(body)
    if records:
        log.info(
            "write-ahead log replayed: %d records (%d bytes) into %d partitions",
            records,
            size,
            len({p for p in named if p.next_offset}),
        )
    return Replayed(list(named), records, size)


def _from_offset(body: memoryview, base: int, offset: int) -> memoryview | None:
    """The entry's batches from the one that starts at `offset` (a power cut may have
    left the first of them in the segment), or None when none starts there."""
    if offset == base:
        return body
    if offset < base:
        return None
    for item in scan_batches(body, 0, base):
        assert not isinstance(item, str), "the WAL's scan checked the body"
        position, header = item
        if header.base_offset == offset:
            return body[position:]
    return None


def _dropped_later(topic: str, index: int, drops: list[tuple[int, str]]) -> bool:
    """Whether a later entry drops `topic`: by its name, or by a name it starts with and
    a '/' (every status log of a topic)."""
    return any(i > index and (topic == name or topic.startswith(name + "/")) for i, name in drops)
