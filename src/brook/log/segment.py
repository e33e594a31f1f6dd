"""One segment file of one partition, as the log sees it.

Sealed segments are immutable and carry their index in a seal at their end.
The one active segment per partition grows by appended batches; its index is
kept in memory and rebuilt by a recovery scan on open.

The index is sparse: it lists the first batch and then a batch only once
limits.index_interval_bytes follow the last one listed (an entry per batch grew a
server's memory by 24 bytes a batch until the segment rolled; docs/RELIABILITY.md).
A lookup starts at the listed batch at or before what it wants and reads on; the
seal also lists the last batch, so a sealed segment's newest timestamp is known.

Thread rules: only the committer changes a segment (its writer appends, its
syncer publishes, under the partition's lock). Readers may look at it at any
time; publishing goes in an order that keeps readers safe: `durable_bytes`
first, then index entries, then the partition's durable offset.

File handles: the read handle is opened on the first read and closed when the
segment is retired (deleted by retention, replaced by a rewrite, or its log
closed), but only once the reads in progress have finished: each read pins it.
A retired segment's later reads raise SegmentRetired, and the reader starts
again from the partition's current segments.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right

from brook import limits
from brook.codec import IndexEntry, first_stamped_at
from brook.errors import StorageError
from brook.storage import AppendFile, ReadFile, Storage


class SegmentRetired(StorageError):
    """A read reached a segment that is no longer part of its log: read again from
    the log's current segments (PartitionLog does)."""


class Segment:
    def __init__(
        self,
        storage: Storage,
        name: str,
        base_offset: int,
        created_ms: int,
        entries: list[IndexEntry],
        durable_bytes: int,
        next_offset: int,
        sealed: bool,
    ) -> None:
        self.storage = storage
        self.name = name
        self.base_offset = base_offset
        self.created_ms = created_ms
        self.bases = array("q")
        self.positions = array("q")
        self.timestamps = array("q")
        self.last_entry: IndexEntry | None = None
        """The newest durable batch, listed or not."""
        self._add(entries)
        self.durable_bytes = durable_bytes
        """Bytes of whole, durable batches (header included; seal excluded)."""
        self.next_offset = next_offset
        """Offset after the segment's last durable record."""
        self.sealed = sealed
        self.appender: AppendFile | None = None
        self._reader: ReadFile | None = None
        self._pins = 0
        """Reads in progress on `_reader`."""
        self._retired = False
        self._handle_lock = threading.Lock()
        self.overlay: tuple[int, bytes] | None = None
        """(position, bytes) read in place of the file from `position` on: the acknowledged
        tail the write-ahead log holds while the file's copy is being written again after a
        failed sync (PartitionLog.rewrite), so readers never see the damage."""

    @property
    def max_timestamp(self) -> int:
        return self.last_entry.timestamp if self.last_entry is not None else self.created_ms

    def entries(self) -> list[IndexEntry]:
        """The index as a seal stores it: the listed batches and the last one."""
        listed = [
            IndexEntry(*e) for e in zip(self.bases, self.positions, self.timestamps, strict=True)
        ]
        last = self.last_entry
        if last is not None and (not listed or listed[-1].position != last.position):
            listed.append(last)
        return listed

    def publish(self, entries: list[IndexEntry], durable_bytes: int, next_offset: int) -> None:
        """Make newly synced batches visible to readers (writer thread only)."""
        self.durable_bytes = durable_bytes
        self._add(entries)
        self.next_offset = next_offset

    def _add(self, entries: list[IndexEntry]) -> None:
        positions = self.positions
        listed_end = positions[-1] + limits.index_interval_bytes if positions else -1
        for entry in entries:
            if entry.position >= listed_end:
                self.bases.append(entry.base_offset)
                positions.append(entry.position)
                self.timestamps.append(entry.timestamp)
                listed_end = entry.position + limits.index_interval_bytes
        if entries:
            self.last_entry = entries[-1]

    def first_at(self, timestamp_ms: int) -> int | None:
        """The base offset of the first durable batch stamped at or after `timestamp_ms`
        in index order, or None if none is. Reads the headers of the batches between
        two listed ones (a sparse index does not know their stamps)."""
        if self.max_timestamp < timestamp_ms or self.last_entry is None:
            return None
        i = bisect_left(self.timestamps, timestamp_ms)
        if i == 0:
            return self.bases[0]
        stop = self.positions[i] if i < len(self.positions) else self.durable_bytes
        reader = self._pin()
        try:
            found = first_stamped_at(
                reader.read, self.name, self.positions[i - 1], stop, timestamp_ms
            )
        finally:
            self._unpin()
        if found is not None:
            return found
        return self.bases[i] if i < len(self.bases) else self.last_entry.base_offset

    def locate(self, offset: int, limit_end: int, bytes_max: int) -> tuple[int, int] | None:
        """Byte range [start, end) of whole batches holding offsets offset..limit_end-1,
        from the listed batch at or before `offset` (so up to index_interval_bytes of
        batches before it: callers drop them) to a listed batch or the durable end.

        At least one listed stretch is included even if it is larger than `bytes_max`.
        Returns None when the segment has no durable batch at or after `offset`.
        """
        count = len(self.positions)
        first = max(0, bisect_right(self.bases, offset) - 1)
        if first >= count:
            return None
        start = self.positions[first]
        last = first + 1
        while (
            last < count
            and self.bases[last] < limit_end
            and self.positions[last] - start < bytes_max
        ):
            last += 1
        end = self.positions[last] if last < count else self.durable_bytes
        return start, end

    def read(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the file. Raises SegmentRetired once the segment
        is retired, StorageError when the file cannot be read."""
        overlay = self.overlay
        if overlay is not None and end > overlay[0]:
            at, tail = overlay
            head = self.read_file(start, at) if start < at else b""
            return head + tail[max(0, start - at) : end - at]
        return self.read_file(start, end)

    def read_file(self, start: int, end: int) -> bytes:
        reader = self._pin()
        try:
            return reader.read(start, end - start)
        finally:
            self._unpin()

    def hold_open(self) -> None:
        """Open the read handle now, and keep it open whatever the file budget, so
        reads of this segment keep reading this file after it is replaced by name (a
        rewrite), until it is retired."""
        reader = self._pin()
        try:
            reader.keep()
        finally:
            self._unpin()

    def _pin(self) -> ReadFile:
        with self._handle_lock:
            if self._retired:
                raise SegmentRetired(f"{self.name} is no longer part of its log")
            if self._reader is None:
                self._reader = self.storage.open_read(self.name)
            self._pins += 1
            return self._reader

    def _unpin(self) -> None:
        with self._handle_lock:
            self._pins -= 1
            if self._retired and not self._pins:
                self._close_reader()

    def retire(self) -> None:
        """No longer part of the log: close the read handle once no read is in progress;
        later reads raise SegmentRetired. Idempotent."""
        with self._handle_lock:
            self._retired = True
            if not self._pins:
                self._close_reader()

    def adopt_reader(self, reader: ReadFile) -> None:
        """Read through `reader`, a handle on this file that its opener read already."""
        with self._handle_lock:
            if self._reader is None and not self._retired:
                self._reader = reader
                return
        reader.close()

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def close(self) -> None:
        """Close the append handle (sealed, or the log closing); reads go on."""
        if self.appender is not None:
            self.appender.close()
            self.appender = None
