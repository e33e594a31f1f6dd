"""The log of one partition: its list of segments and the writer protocol.

Writer side, used only by the committer (docs/ARCHITECTURE.md, "The write path"):
`append` encodes one batch and writes it without syncing; `sync` makes what was
written durable; `publish` then makes it readable; `fail` drops everything not
yet published after a failed write or sync. Roll, retention and compaction
(log/cleaner.py) run with the writer role while nothing is in flight.
Reader side (any thread): `read`, `read_batches`, ... over log/reading.py,
started again when retention or compaction retires a segment under the read.
Opening segment files is log/files.py's job.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

from brook import layout, limits
from brook.codec import SEGMENT_HEADER_BYTES, IndexEntry, encode_batch, encode_seal, scan_batches
from brook.codec.batch import ClientBatches, Columns
from brook.codec.segment import DurableMark
from brook.errors import BrookError, CorruptData, StorageError, TopicNotFound
from brook.log import cleaner, reading
from brook.log.files import (
    create_segment,
    open_segment,
    read_durable_mark,
    write_durable_mark,
)
from brook.log.segment import Segment, SegmentRetired
from brook.ranges import Ranges
from brook.records import Record
from brook.scheduling import Schedule
from brook.storage import Storage

log = logging.getLogger("brook.log")
T = TypeVar("T")


class Written(NamedTuple):
    """Batches appended to a partition in one write, not yet known to be durable."""

    entries: list[IndexEntry]
    """One per batch; the first holds the base offset and timestamp of them all."""
    end_bytes: int
    next_offset: int
    generation: int
    parts: list[bytes | memoryview]
    """The bytes written, for the write-ahead log (log/wal.py) to carry the same."""


class LogSettings:
    """How segments are rolled; shared by every partition of a broker."""

    def __init__(
        self,
        segment_bytes_max: int = limits.segment_bytes_max_default,
        segment_ms_max: int = limits.segment_ms_max_default,
    ) -> None:
        self.segment_bytes_max = segment_bytes_max
        self.segment_ms_max = segment_ms_max


class PartitionLog:
    def __init__(
        self,
        storage: Storage,
        topic: str,
        partition: int,
        settings: LogSettings,
        segments: list[Segment],
    ) -> None:
        assert segments, "a partition always has an active segment"
        self.storage = storage
        self.topic = topic
        self.partition = partition
        self.settings = settings
        self.prefix = layout.partition_prefix(topic, partition)
        self.segments = segments
        """Oldest first; the last is active. Replaced, never mutated, so readers may hold a copy."""
        self.durable_offset = segments[-1].next_offset
        """Offsets below this are durable and may be read."""
        self.next_offset = self.durable_offset
        """The offset the next appended record gets (writer thread only)."""
        self.last_timestamp = max(s.max_timestamp for s in segments)
        self._pending: list[Written] = []
        """Batches written but not yet known durable, oldest first."""
        self._broken = False
        self._cut_to = 0
        """Where a repair cuts the active segment: its end before the append that
        failed (`undo_append`), or its durable bytes after a failed sync (`fail`)."""
        self._generation = 0
        """Bumped by every failure, so batches written before it are never published."""
        self._lock = threading.Lock()
        """Between the committer's writer (append) and syncer (publish, fail)."""
        self.synced_at = (segments[-1].base_offset, segments[-1].durable_bytes, self.next_offset)
        """(segment base, bytes, next offset) of the active segment as of its last sync
        that succeeded: with a write-ahead log, what it holds durably for certain."""
        self.damaged: str | None = None
        """Why a sync or cut of the active segment failed, where the write-ahead log holds
        what it may have lost (the page cache cannot be trusted after a failed sync): the
        committer then writes its tail again from the WAL (`rewrite`)."""
        self.closed = False
        self.clean_offset = 0
        """Where the last compaction pass stopped: the next maps keys from here on."""

    # ----------------------------------------------------------------- open

    @classmethod
    def open(
        cls, storage: Storage, topic: str, partition: int, settings: LogSettings, now_ms: int
    ) -> PartitionLog:
        """Open a partition, recovering its active segment; create it if new.

        On a read-only storage nothing is written: the active segment is read up
        to its durable mark (what its owner acknowledged) and never recovered, and
        a partition with no segment yet reads as empty.
        """
        prefix = layout.partition_prefix(topic, partition)
        read_only = getattr(storage, "read_only", False)
        listed = storage.list(prefix)
        names = [n for n in listed if n.endswith(layout.SEGMENT_SUFFIX)]
        mark = None
        if not read_only and layout.durable_mark(prefix) in listed:
            with contextlib.suppress(CorruptData):  # torn: it claims nothing
                mark = read_durable_mark(storage, prefix)
        segments: list[Segment] = []
        for i, name in enumerate(names):
            last = i == len(names) - 1
            segment = open_segment(storage, name, active=last, read_only=read_only, mark=mark)
            if segment is None:
                continue
            if segments and segments[-1].next_offset != segment.base_offset:
                log.error(
                    "partition %s/%d: offsets %d..%d are missing before %s",
                    topic,
                    partition,
                    segments[-1].next_offset,
                    segment.base_offset - 1,
                    name,
                )
            segments.append(segment)
        if read_only:
            if not segments:
                base = layout.segment(prefix, 0)
                segments = [Segment(storage, base, 0, now_ms, [], SEGMENT_HEADER_BYTES, 0, False)]
            return cls(storage, topic, partition, settings, segments)
        if not segments:
            segments = [create_segment(storage, prefix, partition, 0, now_ms)]
        opened = cls(storage, topic, partition, settings, segments)
        if opened.segments[-1].sealed:
            opened._roll(now_ms)
        active = opened.segments[-1]
        if mark != DurableMark(active.base_offset, active.durable_bytes, active.next_offset):
            opened._mark_durable()
        return opened

    # ---------------------------------------------------------------- reads

    @property
    def start_offset(self) -> int:
        """The oldest retained offset."""
        return self.segments[0].base_offset

    def read(self, offset: int, limit: int, bytes_max: int = limits.read_bytes_max) -> list[Record]:
        """Durable records at offsets >= `offset`, in order, at most `limit`.

        An offset below the oldest retained one reads from the oldest retained.
        Raises CorruptData if a stored batch fails its checksum.
        """
        end = self.durable_offset
        return self._reading(
            lambda segments: reading.records(
                segments, end, self.topic, self.partition, offset, limit, bytes_max
            )
        )

    def offset_at(self, timestamp_ms: int) -> int:
        """The first durable offset whose batch was stamped at or after `timestamp_ms`
        (the end when none was): from the segments' indexes and a few batch headers, no
        record read. Stamps never go backwards within a partition (`append`)."""
        end = self.durable_offset

        def first(segments: list[Segment]) -> int:
            for segment in segments:
                found = segment.first_at(timestamp_ms)
                if found is not None:
                    return min(found, end)
            return end

        return self._reading(first)

    def read_keys(
        self, offset: int, limit: int, schedules: dict[int, Schedule] | None = None
    ) -> list[tuple[int, bytes | None, int]]:
        """(offset, key, timestamp) of durable records at offsets >= `offset`, at most
        about `limit` (whole batches), values left undecoded; with `schedules`, the
        records' priorities and not-before times (reading.keys). Raises CorruptData."""
        raw, _ = self.read_batches(offset, limit)
        return reading.keys(raw, offset, schedules)

    def read_batches(
        self, offset: int, limit: int, bytes_max: int = limits.read_bytes_max
    ) -> tuple[bytes, int]:
        """Whole stored batches holding durable records from `offset` (up to about
        `limit` records), checksums verified, undecoded; and the offset to read next.

        The first batch may start before `offset`, and the last may reach past the
        limit: callers decode from `offset` and cut at their limit. Raises CorruptData.
        """
        end = self.durable_offset
        return self._reading(
            lambda segments: reading.batches(
                segments, end, max(offset, segments[0].base_offset), limit, bytes_max
            )
        )

    def scan_idempotency(
        self, since_ms: int | None = None, from_offset: int | None = None
    ) -> list[tuple[bytes, int, int]]:
        """(idempotency key, offset, timestamp) of durable records newer than `since_ms`
        or, with `from_offset`, in batches holding offsets from it on (reading.py)."""
        return self._reading(
            lambda segments: reading.idempotency_keys(
                segments, self.topic, self.partition, since_ms, from_offset
            )
        )

    def _reading(self, read: Callable[[list[Segment]], T]) -> T:
        """Run `read` over the current segments; again over the new ones when
        retention or compaction retired a segment it was reading."""
        while True:
            segments = self.segments
            try:
                return read(segments)
            except SegmentRetired:
                if self.closed:
                    raise StorageError(
                        f"partition {self.topic}/{self.partition} was closed during the read"
                    ) from None
            except StorageError:
                # Retention may have removed a segment this read was about to open:
                # read again from what is retained now. Any other failure is real.
                if self.segments[0] is segments[0]:
                    raise

    # ----------------------------------------------------------- the writer

    def append(self, pieces: Sequence[Columns | ClientBatches], timestamp: int) -> Written:
        """Write records as one batch per piece (a client's batches as they are),
        in one write and without syncing; returns what was written.

        Timestamps never go backwards within a partition, even if the clock does.
        Rolls the segment first when it is due and nothing is awaiting a sync
        (see `roll_due`). Raises StorageError; the caller must then `fail`.
        """
        with self._lock:
            if self.closed:
                raise TopicNotFound(f"topic {self.topic} was deleted")
            timestamp = max(timestamp, self.last_timestamp)
            if self._broken:
                self._repair()
            active = self.segments[-1]
            if not self._pending and (active.sealed or self._should_roll(active, timestamp)):
                self._roll(timestamp)
                active = self.segments[-1]
            assert active.appender is not None
            position = active.appender.size()
            base = self.next_offset
            parts: list[bytes | memoryview] = []
            entries: list[IndexEntry] = []
            for piece in pieces:
                batches: list[tuple[int, list[bytes | memoryview]]] = (
                    piece.encode(base, timestamp)
                    if isinstance(piece, ClientBatches)
                    else [(base, list(encode_batch(base, timestamp, piece)))]
                )
                for batch_base, batch in batches:
                    entries.append(IndexEntry(batch_base, position, timestamp))
                    parts.extend(batch)
                    position += sum(map(len, batch))
                base += len(piece)
            self._broken = True  # until the append returns, the tail is unknown
            self._cut_to = active.appender.size()
            active.appender.reserve(position - active.appender.size())
            active.appender.append(parts)
            self._broken = False
            self.next_offset = base
            self.last_timestamp = timestamp
            written = Written(entries, active.appender.size(), base, self._generation, parts)
            self._pending.append(written)
            return written

    def roll_due(self, now_ms: int) -> bool:
        """True when the next append would roll but must wait for pending syncs first."""
        return bool(self._pending) and self._should_roll(self.segments[-1], now_ms)

    def sync(self) -> None:
        """Make everything appended so far durable (may run beside `append`). Raises StorageError."""
        with self._lock:
            active = self.segments[-1]
            appender = active.appender
            assert appender is not None
            at = (active.base_offset, appender.size(), self.next_offset)
        appender.sync()
        self._synced(active, at)

    def _synced(self, active: Segment, at: tuple[int, int, int]) -> None:
        with self._lock:
            if self.segments[-1] is active and at[1] >= self.synced_at[1]:
                self.synced_at = at

    def checkpoint_sync(self) -> None:
        """Make everything appended so far durable, for a checkpoint (commit/checkpoint.py):
        beside the writer, without its lock held over the sync. A partition deleted or
        rolled meanwhile needs nothing (a roll syncs the segment it seals). Raises StorageError."""
        with self._lock:
            if self.closed:
                return
            active = self.segments[-1]
            appender = active.appender
            at = (active.base_offset, appender.size() if appender else 0, self.next_offset)
        if appender is None:
            return
        try:
            appender.sync()
        except StorageError as exc:
            if self.closed or active.sealed:
                return
            self.damaged = exc.message
            raise
        self._synced(active, at)

    def rewrite(self, bodies: Sequence[bytes | memoryview]) -> None:
        """Write the active segment's tail again from the write-ahead log after a failed
        sync or cut (`damaged`), with the writer role and nothing in flight: cut it back
        to what its last good sync made durable, append the same batches from `bodies`
        (the partition's WAL entries from that offset, in order), and sync. The segment
        then holds the very bytes its index and readers know. Raises StorageError (still
        damaged: the WAL still holds the records) or CorruptData (the WAL lacks some)."""
        with self._lock:
            active = self.segments[-1]
            base, good_bytes, good_offset = self.synced_at
            if self.closed or active.sealed or active.appender is None:
                self.damaged = None
                return
            assert base == active.base_offset and not self._pending
            want_bytes, want_offset = active.durable_bytes, self.durable_offset
            parts = _from(bodies, good_offset, want_offset)
            if parts is None:
                raise CorruptData(
                    f"partition {self.topic}/{self.partition}: the write-ahead log does not "
                    f"hold offsets {good_offset} to {want_offset - 1} to write them again"
                )
            # Readers read the WAL's copy meanwhile: a cut or write that fails half-way
            # (a full disk) leaves them a damaged file until the next attempt succeeds.
            active.overlay = (good_bytes, b"".join(parts))
            active.appender.truncate(good_bytes)
            self.synced_at = (base, good_bytes, good_offset)
            active.appender.append(parts)
            if active.appender.size() != want_bytes:
                raise CorruptData(
                    f"partition {self.topic}/{self.partition}: written again from the "
                    f"write-ahead log, the segment ends at byte {active.appender.size()}, "
                    f"not {want_bytes}"
                )
            active.appender.sync()
            active.overlay = None
            self.synced_at = (base, want_bytes, want_offset)
            self.next_offset = want_offset
            self._broken = False
            log.warning(
                "partition %s/%d: offsets %d..%d written again from the write-ahead log "
                "after a failed sync (%s)",
                self.topic,
                self.partition,
                good_offset,
                want_offset - 1,
                self.damaged,
            )
            self.damaged = None

    def undo_append(self) -> None:
        """After an `append` that raised: cut off what it may have written, keeping the
        batches written before it (the write-ahead log holds them: they may be durable).
        A cut that fails is made again before the next append."""
        with self._lock:
            if self.closed or not self._broken:
                return
            try:
                self._repair()
            except BrookError as exc:
                log.warning(
                    "partition %s/%d: cannot cut a failed write off yet: %s",
                    self.topic,
                    self.partition,
                    exc,
                )

    def restore(self, body: bytes | memoryview, now_ms: int) -> int:
        """Append batches as the write-ahead log holds them (replay, before serving),
        readable at once; the caller syncs before the checkpoint. Returns the next
        offset. The batches must start at `next_offset` (log/replay.py checks)."""
        if getattr(self.storage, "read_only", False):
            return self._overlay(body)
        with self._lock:
            active = self.segments[-1]
            if active.sealed or self._should_roll(active, now_ms):
                self._roll(now_ms)
                active = self.segments[-1]
            assert active.appender is not None
            position = active.appender.size()
            active.appender.append([body])
            return self._published(active, body, position)

    def _overlay(self, body: bytes | memoryview) -> int:
        """A reader beside the owner: the batches the WAL holds past the segment, read in
        memory in place of the file's tail (the file's copy may not be durable, or on
        object storage not stored at all, until the owner's next checkpoint)."""
        with self._lock:
            active = self.segments[-1]
            at, tail = active.overlay or (active.durable_bytes, b"")
            active.overlay = (at, tail + bytes(body))
            return self._published(active, body, at + len(tail))

    def _published(self, active: Segment, body: bytes | memoryview, position: int) -> int:
        """Index and publish WAL batches `body` now at byte `position` of the active
        segment (lock held; replay): readable at once. Returns the next offset."""
        entries = []
        next_offset = self.next_offset
        for item in scan_batches(body, 0, next_offset):
            assert not isinstance(item, str), "the WAL's scan checked the body"
            at, header = item
            entries.append(IndexEntry(header.base_offset, position + at, header.timestamp))
            next_offset = header.next_offset
        active.publish(entries, position + len(body), next_offset)
        self.next_offset = self.durable_offset = next_offset
        self.last_timestamp = max(self.last_timestamp, entries[-1].timestamp)
        return next_offset

    def publish(self, upto: Written) -> bool:
        """After a sync that began after `upto` was written: make it and everything
        before it readable. False if a failure dropped it in the meantime."""
        with self._lock:
            if upto.generation != self._generation:
                return False
            done = [w for w in self._pending if w.next_offset <= upto.next_offset]
            if done:
                self._pending = self._pending[len(done) :]
                self.segments[-1].publish(
                    [e for w in done for e in w.entries], done[-1].end_bytes, done[-1].next_offset
                )
                self.durable_offset = done[-1].next_offset
                self._mark_durable()
            return True

    def fail(self, generation: int | None = None) -> None:
        """Drop everything appended and not yet published, on disk too if possible.

        Batches written but not yet published are failed with it: their
        generation no longer matches, so `publish` refuses them. With a
        `generation`, does nothing if a failure already ended that generation.
        """
        with self._lock:
            if self.closed or (generation is not None and generation != self._generation):
                return
            self._generation += 1
            self._pending = []
            self.next_offset = self.durable_offset
            self._cut_to = self.segments[-1].durable_bytes
            self._broken = True
            try:
                self._repair()
            except BrookError as exc:  # Fenced too: the caller is answered either way
                self._broken = True
                log.warning(
                    "partition %s/%d: cannot drop a failed batch yet: %s",
                    self.topic,
                    self.partition,
                    exc,
                )

    def _repair(self) -> None:
        """Cut the active segment back to `_cut_to` (raises StorageError)."""
        active = self.segments[-1]
        if active.sealed:
            # A roll sealed it but could not start the next segment: the seal is
            # durable and nothing follows it; the next append starts the segment.
            self._broken = False
            return
        assert active.appender is not None
        cut = max(self._cut_to, active.durable_bytes)
        try:
            active.appender.truncate(cut)  # a cut is synced: what it leaves is durable
        except StorageError as exc:
            self.damaged = exc.message
            raise
        self._broken = False
        base, synced_bytes, _ = self.synced_at
        if base == active.base_offset and cut < synced_bytes:
            self.synced_at = (base, cut, self.next_offset)  # what is left of the synced part

    def _should_roll(self, active: Segment, now_ms: int) -> bool:
        if not len(active.positions):
            return False
        too_big = active.durable_bytes >= self.settings.segment_bytes_max
        too_old = now_ms - active.created_ms >= self.settings.segment_ms_max
        return too_big or too_old

    def _roll(self, now_ms: int) -> None:
        """Seal the active segment (if not yet) and start a new one."""
        active = self.segments[-1]
        if not active.sealed:
            assert active.appender is not None
            seal = encode_seal(active.entries(), active.next_offset, active.durable_bytes)
            try:
                # Cut any preallocated tail first, so the seal ends the file.
                active.appender.truncate(active.durable_bytes)
                active.appender.append([seal])
                active.appender.sync()
            except StorageError as exc:
                self._broken = True
                self._cut_to = active.durable_bytes
                self.damaged = exc.message
                raise
            active.sealed = True
            active.close()
        fresh = create_segment(
            self.storage, self.prefix, self.partition, active.next_offset, now_ms
        )
        self.segments = [*self.segments, fresh]
        self.synced_at = (fresh.base_offset, fresh.durable_bytes, fresh.next_offset)
        self._mark_durable()

    def _mark_durable(self) -> None:
        write_durable_mark(self.storage, self.prefix, self.segments[-1])

    # ------------------------------------------- retention and compaction (writer role)

    def enforce_retention(
        self,
        retention_ms: int | None,
        retention_bytes: int | None,
        now_ms: int,
        needed: Callable[[int, int], Ranges] | None = None,
    ) -> int:
        """Delete or trim the oldest sealed segments past the limits (log/cleaner.py);
        returns how many were deleted."""
        return cleaner.enforce_retention(self, retention_ms, retention_bytes, now_ms, needed)

    def compact(self) -> int:
        """One compaction pass (log/cleaner.py); returns how many records it dropped."""
        return cleaner.compact(self)

    def drop_before(self, offset: int) -> int:
        """Delete sealed segments holding only offsets below `offset`; returns how many."""
        removed = 0
        while len(self.segments) > 1 and self.segments[0].next_offset <= offset:
            self.drop_oldest()
            removed += 1
        return removed

    def drop_oldest(self) -> None:
        """Delete the oldest sealed segment; reads in progress on it finish first."""
        oldest = self.segments[0]
        assert len(self.segments) > 1, "the active segment is never dropped"
        self.segments = self.segments[1:]
        oldest.retire()
        self.storage.delete(oldest.name)

    def replace(self, index: int, fresh: Segment) -> None:
        """Put `fresh` (a rewrite, already stored) in place of sealed segment `index`."""
        old = self.segments[index]
        assert old.sealed and index < len(self.segments) - 1, "only sealed segments are rewritten"
        self.segments = [*self.segments[:index], fresh, *self.segments[index + 1 :]]
        old.retire()

    def close(self) -> None:
        """Close every file handle (reads in progress finish first)."""
        with self._lock:
            self.closed = True
            for segment in self.segments:
                segment.close()
                segment.retire()


def _from(bodies: Sequence[bytes | memoryview], start: int, end: int) -> list[memoryview] | None:
    """The batches of `bodies` (whole batches, in offset order, possibly overlapping what
    is kept) that hold offsets `start` to `end` exactly; None when they do not."""
    parts: list[memoryview] = []
    at = start
    for body in bodies:
        view = memoryview(body)
        for item in scan_batches(view, 0, None):
            assert not isinstance(item, str), "the WAL's scan checked the body"
            position, header = item
            if header.base_offset < at:
                continue
            if header.base_offset != at:
                return None
            parts.append(view[position : position + header.length])
            at = header.next_offset
    return parts if at == end else None
