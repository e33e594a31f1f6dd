"""Reading the records queue groups lease: by position, from whole batches read
lately and shared by every group of the broker.

A group leases a batch's records a hundred or so at a time, and the groups of one
topic (a thousand endpoints' delivery groups) lease the same records at about the
same time: reading each lease's records afresh would fetch and checksum the same
stored batches again and again, once per group. So the whole batches read last
(their checksums verified once) are kept in one cache for all groups, bounded in
bytes, least recently used first out, and only the records wanted are decoded from
them. Stored batches never change in place (a rewrite makes a new file), so what was
read stays true to what was written; a deleted topic's batches are dropped with it.
"""

from __future__ import annotations

import threading
from bisect import bisect_right, insort
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

from brook import limits
from brook.codec import decode_records, parse_header
from brook.log.partition import PartitionLog
from brook.records import Record


class _Batches(NamedTuple):
    first: int
    """The base offset of the first batch held."""
    end: int
    """The offset after the last record held."""
    raw: bytes


class BatchCache:
    """Whole batches read lately, by partition log, within `bytes_max`. Any thread.

    Keyed by the partition log itself, not its topic's name: a topic deleted and made
    again has new logs, so nothing read before can be found for it."""

    def __init__(self, bytes_max: int) -> None:
        self.bytes_max = bytes_max
        self._mutex = threading.Lock()
        self._held: OrderedDict[tuple[PartitionLog, int], _Batches] = OrderedDict()
        """By (partition log, first offset), least recently used first."""
        self._firsts: dict[PartitionLog, list[int]] = {}
        """Per partition, the first offsets of what is held, sorted."""
        self.bytes = 0
        self.reads = 0
        """Storage reads made for the groups (what the cache saves shows here)."""

    def find(self, partition_log: PartitionLog, offset: int) -> _Batches | None:
        with self._mutex:
            firsts = self._firsts.get(partition_log)
            if not firsts:
                return None
            at = bisect_right(firsts, offset) - 1
            if at < 0:
                return None
            key = (partition_log, firsts[at])
            held = self._held[key]
            if offset >= held.end:
                return None
            self._held.move_to_end(key)
            return held

    def add(self, partition_log: PartitionLog, batches: _Batches) -> None:
        key = (partition_log, batches.first)
        with self._mutex:
            self.reads += 1
            if key in self._held:
                self._drop(key)
            self._held[key] = batches
            insort(self._firsts.setdefault(partition_log, []), batches.first)
            self.bytes += len(batches.raw)
            while self.bytes > self.bytes_max and len(self._held) > 1:
                self._drop(next(iter(self._held)))

    def forget(self, topic: str) -> None:
        """The topic is deleted: what was read of it is of no use (memory back now)."""
        with self._mutex:
            for key in [k for k in self._held if k[0].topic == topic]:
                self._drop(key)

    def _drop(self, key: tuple[PartitionLog, int]) -> None:
        gone = self._held.pop(key)
        self.bytes -= len(gone.raw)
        partition_log, first = key
        firsts = self._firsts[partition_log]
        firsts.remove(first)
        if not firsts:
            del self._firsts[partition_log]


class RecordReader:
    """One group's reads of its topic, through the cache it shares with the others."""

    def __init__(
        self, topic: str, logs: Callable[[], list[PartitionLog]], cache: BatchCache
    ) -> None:
        self.topic = topic
        self._logs = logs
        self._cache = cache

    def records(self, positions: list[tuple[int, int]]) -> list[Record]:
        """The records at `positions` (sorted); records no longer stored are left out.
        Raises CorruptData."""
        logs = self._logs()
        found: list[Record] = []
        i = 0
        while i < len(positions):
            p, offset = positions[i]
            held = self._cache.find(logs[p], offset)
            if held is None:
                raw, end = logs[p].read_batches(
                    offset, limits.queue_read_ahead_records, limits.read_bytes_max
                )
                if not raw:
                    i += 1  # gone (retention) or not there
                    continue
                header = parse_header(raw, 0)
                assert not isinstance(header, str), "read_batches returns whole, verified batches"
                held = _Batches(header.base_offset, end, raw)
                self._cache.add(logs[p], held)
            j = i
            while j < len(positions) and positions[j][0] == p and positions[j][1] < held.end:
                j += 1
            if j == i:
                i += 1  # in a gap (compaction): not stored
                continue
            found.extend(self._decode(p, held, [o for _, o in positions[i:j]]))
            i = j
        return found

    def _decode(self, partition: int, held: _Batches, offsets: list[int]) -> list[Record]:
        """The records at `offsets` (sorted, inside `held`), decoding only from the
        first wanted to the last wanted of each batch."""
        raw, k = held.raw, 0
        out: list[Record] = []
        pos = 0
        while pos < len(raw) and k < len(offsets):
            header = parse_header(raw, pos)
            assert not isinstance(header, str)
            stop = header.base_offset + header.record_count
            if offsets[k] < stop:
                last = k
                while last + 1 < len(offsets) and offsets[last + 1] < stop:
                    last += 1
                start = offsets[k]
                got, _ = decode_records(
                    raw,
                    pos,
                    header,
                    self.topic,
                    partition,
                    start,
                    limit=offsets[last] - start + 1,
                )
                wanted = set(offsets[k : last + 1])
                out.extend(r for r in got if r.offset in wanted)
                k = last + 1
            pos += header.length
        return out
