"""The log of one partition: its segments, its writer side and its reader side.

Writer side, used only by the committer (docs/ARCHITECTURE.md, "The write path"):
`append` encodes one batch and writes it without syncing; `sync` makes what was
written durable; `publish` then makes it readable; `fail` drops everything not
yet published after a failed write or sync. Roll, retention and compaction run
with the writer role while nothing is in flight. Reader side (any thread): `read`.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import NamedTuple

from brook import layout, limits
from brook.codec import (
    SEGMENT_HEADER_BYTES,
    TRAILER_BYTES,
    IndexEntry,
    decode_keys,
    decode_records,
    decode_seal,
    decode_segment_header,
    encode_batch,
    encode_seal,
    encode_segment_header,
    parse_header,
    scan_batches,
)
from brook.codec.batch import FLAG_IDEMPOTENCY, ClientBatches, Columns, verify
from brook.codec.segment import (
    DURABLE_MARK_BYTES,
    DurableMark,
    decode_durable_mark,
    encode_durable_mark,
    seal_position,
)
from brook.errors import BrookError, CorruptData, StorageError, TopicNotFound
from brook.log.compaction import Run, keeping, survivors
from brook.log.recovery import scan_segment
from brook.log.segment import Segment
from brook.ranges import Ranges
from brook.records import Record
from brook.storage import ReadFile, Storage

log = logging.getLogger("brook.log")

"""Per partition, beside its segments: the acknowledged end of the active segment."""
MARK_READ_ATTEMPTS = 5
"""A mark read while the broker rewrites it fails its checksum: read it again."""


class Written(NamedTuple):
    """Batches appended to a partition in one write, not yet known to be durable."""

    entries: list[IndexEntry]
    """One per batch; the first holds the base offset and timestamp of them all."""
    end_bytes: int
    next_offset: int
    generation: int


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
        self._generation = 0
        """Bumped by every failure, so batches written before it are never published."""
        self._lock = threading.Lock()
        """Between the committer's writer (append) and syncer (publish, fail)."""
        self.closed = False
        self._compacted_through = 0
        """How many sealed segments the last compaction saw (new ones trigger the next)."""

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
        names = [n for n in storage.list(prefix) if n.endswith(layout.SEGMENT_SUFFIX)]
        segments: list[Segment] = []
        for i, name in enumerate(names):
            last = i == len(names) - 1
            segment = _open_segment(storage, name, active=last, read_only=read_only)
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
            segments = [_create_segment(storage, prefix, partition, 0, now_ms)]
        opened = cls(storage, topic, partition, settings, segments)
        if opened.segments[-1].sealed:
            opened._roll(now_ms)
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
        while True:
            segments = self.segments
            try:
                return self._read(segments, offset, limit, bytes_max)
            except StorageError:
                # Retention may have removed a segment this read was about to open:
                # read again from what is retained now. Any other failure is real.
                if self.segments[0] is segments[0]:
                    raise

    def _read(
        self, segments: list[Segment], offset: int, limit: int, bytes_max: int
    ) -> list[Record]:
        end = self.durable_offset
        offset = max(offset, segments[0].base_offset)
        records: list[Record] = []
        while len(records) < limit:
            raw, next_offset = self._batches(segments, end, offset, limit - len(records), bytes_max)
            pos = 0
            while pos < len(raw) and len(records) < limit:
                header = parse_header(raw, pos)
                assert not isinstance(header, str), "_batches returns whole, verified batches"
                got, _ = decode_records(
                    raw, pos, header, self.topic, self.partition, offset, limit=limit - len(records)
                )
                records.extend(got)
                pos += header.length
            if next_offset <= offset:
                break
            offset = next_offset
        return records

    def read_keys(self, offset: int, limit: int) -> list[tuple[int, bytes | None, int]]:
        """(offset, key, timestamp) of durable records at offsets >= `offset`, at most
        about `limit` (whole batches), values left undecoded. Raises CorruptData."""
        raw, _ = self.read_batches(offset, limit)
        out: list[tuple[int, bytes | None, int]] = []
        pos = 0
        while pos < len(raw):
            header = parse_header(raw, pos)
            assert not isinstance(header, str), "read_batches returns whole, verified batches"
            offsets, keys = decode_keys(raw, pos, header, offset)
            ts = header.timestamp
            if keys is None:
                out.extend((o, None, ts) for o in offsets)
            else:
                out.extend(zip(offsets, keys, repeat(ts)))
            pos += header.length
        return out

    def read_batches(
        self, offset: int, limit: int, bytes_max: int = limits.read_bytes_max
    ) -> tuple[bytes, int]:
        """Whole stored batches holding durable records from `offset` (up to about
        `limit` records), checksums verified, undecoded; and the offset to read next.

        The first batch may start before `offset`, and the last may reach past the
        limit: callers decode from `offset` and cut at their limit. Raises CorruptData.
        """
        segments = self.segments
        return self._batches(
            segments, self.durable_offset, max(offset, segments[0].base_offset), limit, bytes_max
        )

    def _batches(
        self, segments: list[Segment], end: int, offset: int, limit: int, bytes_max: int
    ) -> tuple[bytes, int]:
        """The one walk over segments: batches from `offset` below `end`, verified."""
        while offset < end:
            index = bisect_right(segments, offset, key=_base_offset) - 1
            segment = segments[index]
            found = segment.locate(offset, min(end, offset + limit), bytes_max)
            if found is None:
                if index + 1 >= len(segments):
                    break
                offset = max(offset, segments[index + 1].base_offset)
                continue
            start, stop = found
            buf = segment.read(start, stop)
            pos, last = 0, offset
            while pos < len(buf):
                header = parse_header(buf, pos)
                if isinstance(header, str) or not verify(buf, pos, header):
                    problem = header if isinstance(header, str) else "checksum mismatch"
                    raise CorruptData(f"{segment.name} at byte {start + pos}: {problem}")
                if header.base_offset >= end:
                    break
                pos += header.length
                last = header.next_offset
            if last > offset:
                return buf[:pos], min(last, end)
            if index + 1 >= len(segments):
                break
            offset = max(
                offset, segment.next_offset
            )  # a gap left by compaction at the segment's end
        return b"", offset

    def scan_idempotency(
        self, since_ms: int | None = None, from_offset: int | None = None
    ) -> list[tuple[bytes, int, int]]:
        """(idempotency key, offset, timestamp) of durable records newer than `since_ms`
        or, with `from_offset`, in batches holding offsets from it on.

        Reads only batches inside the window (timestamps never decrease within a
        partition). A corrupt batch is reported and skipped, never fatal: its
        keys are forgotten, so a retry of one of them could be appended again.
        """
        found: list[tuple[bytes, int, int]] = []
        for segment in self.segments:
            if from_offset is not None:
                first = max(0, bisect_right(segment.bases, from_offset) - 1)
                if segment.next_offset <= from_offset:
                    continue
            else:
                assert since_ms is not None
                first = bisect_left(segment.timestamps, since_ms)
            if first >= len(segment.positions):
                continue
            start = segment.positions[first]
            buf = segment.read(start, segment.durable_bytes)
            for item in scan_batches(buf, 0, None):
                if isinstance(item, str):
                    log.error(
                        "%s: idempotency keys after byte %d are unreadable: %s",
                        segment.name,
                        start,
                        item,
                    )
                    break
                pos, header = item
                if not header.flags & FLAG_IDEMPOTENCY:
                    continue
                records, keys = decode_records(
                    buf, pos, header, self.topic, self.partition, want_idempotency=True
                )
                for record, key in zip(records, keys or (), strict=True):
                    if key is not None:
                        found.append((key, record.offset, record.timestamp))
        return found

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
            active.appender.reserve(position - active.appender.size())
            active.appender.append(parts)
            self._broken = False
            self.next_offset = base
            self.last_timestamp = timestamp
            written = Written(entries, active.appender.size(), base, self._generation)
            self._pending.append(written)
            return written

    def roll_due(self, now_ms: int) -> bool:
        """True when the next append would roll but must wait for pending syncs first."""
        return bool(self._pending) and self._should_roll(self.segments[-1], now_ms)

    def sync(self) -> None:
        """Make everything appended so far durable (may run beside `append`). Raises StorageError."""
        appender = self.segments[-1].appender
        assert appender is not None
        appender.sync()

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
        """Cut the active segment back to its durable bytes (raises StorageError)."""
        active = self.segments[-1]
        if active.sealed:
            # A roll sealed it but could not start the next segment: the seal is
            # durable and nothing follows it; the next append starts the segment.
            self._broken = False
            return
        assert active.appender is not None
        active.appender.truncate(active.durable_bytes)
        self._broken = False

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
            except StorageError:
                self._broken = True
                raise
            active.sealed = True
            active.close()
        fresh = _create_segment(
            self.storage, self.prefix, self.partition, active.next_offset, now_ms
        )
        self.segments = [*self.segments, fresh]
        self._mark_durable()

    def _mark_durable(self) -> None:
        """Tell readers outside the broker how much of the active segment is acknowledged.

        Written after the sync that made it so, and never moved back, so it can
        lag the truth but never lead it (docs/FORMAT.md, "Durable mark").
        """
        active = self.segments[-1]
        mark = DurableMark(active.base_offset, active.durable_bytes, active.next_offset)
        self.storage.write_hint(layout.durable_mark(self.prefix), encode_durable_mark(mark))

    def enforce_retention(
        self,
        retention_ms: int | None,
        retention_bytes: int | None,
        now_ms: int,
        needed: Callable[[int, int], Ranges] | None = None,
    ) -> int:
        """Delete the oldest sealed segments past the limits; returns how many.

        `needed(base, next)` names the offsets in a segment that someone (queue
        groups) still needs: such a segment is not deleted, and once at least half
        of its records are no longer needed it is rewritten with only those, at
        their offsets. Writer role.
        """
        removed = 0
        index = 0
        while index < len(self.segments) - 1:
            segment = self.segments[index]
            total = sum(s.durable_bytes for s in self.segments)
            expired = retention_ms is not None and segment.max_timestamp < now_ms - retention_ms
            oversize = (
                retention_bytes is not None and total - segment.durable_bytes >= retention_bytes
            )
            if not (expired or oversize):
                break
            wanted = needed(segment.base_offset, segment.next_offset) if needed else Ranges()
            if not wanted and index == 0:
                self.segments = self.segments[1:]
                self.storage.delete(segment.name)
                removed += 1
                continue
            if wanted:
                self._keep_only(index, wanted)
            index += 1
        return removed

    def _keep_only(self, index: int, wanted: Ranges) -> None:
        """Rewrite sealed segment `index` with only the `wanted` records, once at least
        half of what it holds is not wanted (so rewrites cost little overall)."""
        segment = self.segments[index]
        if 2 * len(wanted) > segment.next_offset - segment.base_offset:
            return  # cannot be half garbage yet, whatever it holds
        batches = self._decoded_batches(segment)
        held = sum(len(records) for _, records, _ in batches)
        if 2 * len(wanted) > held:
            return
        runs, dropped = keeping(batches, lambda record: record.offset in wanted)
        self._rewrite(index, runs)
        log.info(
            "%s: kept %d records still needed by queue groups, dropped %d",
            segment.name,
            held - dropped,
            dropped,
        )

    def _rewrite(self, index: int, runs: list[Run]) -> None:
        """Replace sealed segment `index` by one holding `runs`, atomically; readers
        that hold the old segment keep reading the old file until they let go."""
        segment = self.segments[index]
        data, entries, data_end = _encode_segment(self.partition, segment, runs)
        segment.read(0, 0)  # hold the old file open for readers of the old segment
        self.storage.write_atomic(segment.name, data)
        fresh = Segment(
            self.storage,
            segment.name,
            segment.base_offset,
            segment.created_ms,
            entries,
            data_end,
            segment.next_offset,
            sealed=True,
        )
        self.segments = [*self.segments[:index], fresh, *self.segments[index + 1 :]]

    def drop_before(self, offset: int) -> int:
        """Delete sealed segments holding only offsets below `offset`; returns how many.
        Writer role."""
        removed = 0
        while len(self.segments) > 1 and self.segments[0].next_offset <= offset:
            oldest = self.segments[0]
            self.segments = self.segments[1:]
            self.storage.delete(oldest.name)
            removed += 1
        return removed

    def compact(self) -> int:
        """Rewrite sealed segments holding records superseded by a newer one of the
        same key; returns how many records were dropped. Writer role, nothing in flight.

        Each rewrite replaces the file atomically; readers that already hold the
        old segment keep reading the old file, which stays open until they let go.
        """
        sealed = self.segments[:-1]
        if len(sealed) == self._compacted_through:
            return 0
        latest: dict[bytes, int] = {}
        for segment in self.segments:
            for _, records, _ in self._decoded_batches(segment):
                for record in records:
                    if record.key is not None:
                        latest[record.key] = record.offset
        dropped_total = 0
        for index, segment in enumerate(sealed):
            runs, dropped = survivors(self._decoded_batches(segment), latest)
            if not dropped:
                continue
            self._rewrite(index, runs)
            dropped_total += dropped
        self._compacted_through = len(sealed)
        return dropped_total

    def _decoded_batches(
        self, segment: Segment
    ) -> list[tuple[int, list[Record], list[bytes | None]]]:
        if not len(segment.positions):
            return []
        start = segment.positions[0]
        buf = segment.read(start, segment.durable_bytes)
        out = []
        for item in scan_batches(buf, 0, None):
            if isinstance(item, str):
                raise CorruptData(f"{segment.name}: {item}")
            pos, header = item
            records, keys = decode_records(
                buf, pos, header, self.topic, self.partition, want_idempotency=True
            )
            out.append((header.timestamp, records, keys or [None] * len(records)))
        return out

    def close(self) -> None:
        with self._lock:
            self.closed = True
            for segment in self.segments:
                segment.close()


def _base_offset(segment: Segment) -> int:
    return segment.base_offset


def _encode_segment(
    partition: int, old: Segment, runs: list[Run]
) -> tuple[bytes, list[IndexEntry], int]:
    """A sealed segment holding `runs`, with the base and next offset of `old`;
    also its index and where its batches end (where the seal starts)."""
    parts = [encode_segment_header(partition, old.base_offset, old.created_ms)]
    position = len(parts[0])
    entries = []
    for run in runs:
        columns = Columns.from_records(run.records, run.idempotency_keys)
        batch = encode_batch(run.records[0].offset, run.timestamp, columns)
        entries.append(IndexEntry(run.records[0].offset, position, run.timestamp))
        parts.extend(batch)
        position += sum(map(len, batch))
    parts.append(encode_seal(entries, old.next_offset, position))
    return b"".join(parts), entries, position


def _create_segment(
    storage: Storage, prefix: str, partition: int, base: int, now_ms: int
) -> Segment:
    name = layout.segment(prefix, base)
    header = encode_segment_header(partition, base, now_ms)
    segment = Segment(storage, name, base, now_ms, [], len(header), base, sealed=False)
    segment.appender = storage.create_appendable(name, header)
    return segment


def read_durable_mark(storage: Storage, prefix: str) -> DurableMark | None:
    """The partition's durable mark (None when there is none); read again while a
    rewrite by the owner makes it fail its checksum. Raises CorruptData."""
    for _ in range(MARK_READ_ATTEMPTS):
        raw = storage.read_all(layout.durable_mark(prefix))
        if raw is None:
            return None
        mark = decode_durable_mark(raw[:DURABLE_MARK_BYTES])
        if mark is not None:
            return mark
    raise CorruptData(f"{layout.durable_mark(prefix)} does not hold a valid mark")


def _read_sealed(
    reader: ReadFile, storage: Storage, name: str, base: int
) -> tuple[int, Segment | None] | str:
    """A segment's size and, when it carries a valid seal, the segment from it; or
    why its header is not valid."""
    size = reader.size()
    header = decode_segment_header(reader.read(0, SEGMENT_HEADER_BYTES))
    if isinstance(header, str) or header.base_offset != base:
        return header if isinstance(header, str) else "base offset mismatch"
    if size >= SEGMENT_HEADER_BYTES + TRAILER_BYTES:
        tail_start = seal_position(reader.read(size - TRAILER_BYTES, TRAILER_BYTES), size)
        if tail_start is not None:
            sealed = decode_seal(reader.read(tail_start, size - tail_start), size)
            if sealed is not None:
                entries, next_offset, index_position = sealed
                segment = Segment(
                    storage,
                    name,
                    base,
                    header.created_ms,
                    entries,
                    index_position,
                    next_offset,
                    True,
                )
                return size, segment
    return size, None


def _acknowledged_end(storage: Storage, prefix: str, base: int, size: int) -> int:
    """How much of the active segment an outside reader may read: up to its durable
    mark (what the owner acknowledged), or all of it where there is no mark (object
    storage, where only synced chunks exist)."""
    mark = read_durable_mark(storage, prefix)
    if mark is not None and mark.segment_base == base:
        return min(size, mark.durable_bytes)
    if mark is not None and mark.segment_base < base:
        return SEGMENT_HEADER_BYTES  # started after the mark: nothing acknowledged yet
    return size


def _open_segment(
    storage: Storage, name: str, active: bool, read_only: bool = False
) -> Segment | None:
    """Open one segment file: from its seal if it has one, else by a recovery scan.

    `read_only` looks without changing anything, as an outside reader may: the
    active segment up to what its owner acknowledged, never recovered or started
    again, and an older segment without a seal is damage.
    """
    base = int(name.rsplit("/", 1)[1].split(".")[0])
    reader = storage.open_read(name)
    try:
        found = _read_sealed(reader, storage, name, base)
        if isinstance(found, str):
            if active and read_only:
                return None  # its owner is creating it, or will start it again
            if active:
                # A crash while the file was being created: it never held a record.
                log.warning("%s: %s; starting it again", name, found)
                storage.delete(name)
                return None
            raise CorruptData(f"{name}: {found}")
        size, sealed = found
        if sealed is not None:
            return sealed
        if read_only:
            if not active:
                raise CorruptData(f"{name}: an older segment carries no valid seal")
            size = _acknowledged_end(storage, name.rsplit("/", 1)[0] + "/", base, size)
        buf = reader.read(0, size)
    finally:
        reader.close()

    header = decode_segment_header(buf[:SEGMENT_HEADER_BYTES])
    assert not isinstance(header, str), "_read_sealed checked the header"
    scan = scan_segment(buf, base)
    segment = Segment(
        storage,
        name,
        base,
        header.created_ms,
        scan.entries,
        scan.valid_bytes,
        scan.next_offset,
        False,
    )
    if read_only:
        return segment
    zero_tail = buf.count(0, scan.valid_bytes) == size - scan.valid_bytes
    if scan.problem is not None and not zero_tail:
        dropped = size - scan.valid_bytes
        log.warning(
            "recovery %s: kept offsets %d..%d, dropped %d bytes after byte %d: %s",
            name,
            base,
            scan.next_offset - 1,
            dropped,
            scan.valid_bytes,
            scan.problem,
        )
    if active:
        segment.appender = storage.open_appendable(name)
        if scan.valid_bytes < size:
            segment.appender.truncate(scan.valid_bytes)
        # Bytes written before a crash but never synced are in the page cache only:
        # make them durable before anyone can read them.
        segment.appender.sync()
    return segment
