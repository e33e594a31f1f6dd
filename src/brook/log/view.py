"""A read-only view of a topic's stored log, for readers outside the broker (Spark).

It reads the storage directly, beside a broker that may be writing, and never
through it: no lock is taken, no recovery is run, nothing is written. What it
may read (docs/GUARANTEES.md, "Outside readers"):
- sealed segments whole, from their seal's index;
- the active segment only up to its durable mark (docs/FORMAT.md), which the
  broker writes after each sync, so a batch that could still be cut back is
  never read. On object storage, where there is no mark, up to the synced
  chunks, which hold only whole batches.

Planning (`TopicView`) runs where the reader is planned (Spark's driver), reads
batch headers and seal indexes only, never records, and remembers what it
learned, so polling a growing segment looks only at its new batches. Reading
(`read_slice`) runs anywhere, fetches only the bytes of its slice, and verifies
every batch's CRC32C.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import NamedTuple

import msgspec

from brook import layout, limits
from brook.codec import (
    BATCH_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
    BatchHeader,
    first_stamped_at,
    parse_header,
)
from brook.codec.batch import decode_records, verify
from brook.errors import CorruptData, StorageError, TopicNotFound
from brook.log.files import base_of, read_durable_mark, read_seal
from brook.records import Record, TopicConfig
from brook.storage import ReadFile, Storage

_decode_config = msgspec.json.Decoder(TopicConfig).decode


class Extent(NamedTuple):
    """What an outside reader may read of one segment."""

    name: str
    base_offset: int
    next_offset: int
    """The offset after the last readable record."""
    end_bytes: int
    """Where its readable batches end."""
    bases: list[int]
    """First offset of each readable batch, in order."""
    positions: list[int]
    """Byte position of each readable batch."""
    stamps: list[int]
    """When the broker wrote each readable batch (ms since the epoch)."""


class SegmentSlice(NamedTuple):
    """One unit of reading: offsets [start_offset, end_offset) of one segment, found in
    bytes [byte_start, byte_end). Plain values, so it pickles to a Spark task."""

    topic: str
    partition: int
    name: str
    start_offset: int
    end_offset: int
    byte_start: int
    byte_end: int


class _Growing:
    """What was learned of an active segment so far: its batches up to `end_bytes`."""

    def __init__(self, base: int) -> None:
        self.end_bytes = SEGMENT_HEADER_BYTES
        self.next_offset = base
        self.bases: list[int] = []
        self.positions: list[int] = []
        self.stamps: list[int] = []


class TopicView:
    """Plans reads of one topic: offsets per partition and the slices that hold them."""

    def __init__(self, storage: Storage, topic: str, partitions: int | None = None) -> None:
        """A view of `topic`; an internal log (no topic.json) is named with its `partitions`."""
        self.storage = storage
        self.topic = topic
        if partitions is None:
            raw = storage.read_all(layout.topic_config(topic))
            if raw is None:
                raise TopicNotFound(f"topic {topic} does not exist in this storage")
            partitions = _decode_config(raw).partitions
        self.partitions = partitions
        self._sealed: dict[tuple[str, int], Extent] = {}
        self._growing: dict[str, _Growing] = {}
        self._firsts: dict[str, tuple[str, bytes]] = {}
        """Per partition prefix, its oldest segment and that segment's header when last
        looked at: a partition made again under the name (its topic or queue group
        deleted and made again) starts with another, and what was learned of the old
        one must not be applied to the new (_check_incarnation)."""

    def refresh(self) -> None:
        """Look again at object storage's catalog (a local directory is always current)."""
        refresh = getattr(self.storage, "refresh", None)
        if refresh is not None:
            refresh()

    def extents(self, partition: int) -> list[Extent]:
        """The readable segments of `partition`, oldest first. Raises CorruptData, StorageError."""
        prefix = layout.partition_prefix(self.topic, partition)
        names = [n for n in self.storage.list(prefix) if n.endswith(layout.SEGMENT_SUFFIX)]
        if names:
            self._check_incarnation(prefix, names[0])
        out = []
        for i, name in enumerate(names):
            extent = self._extent(prefix, name, last=i == len(names) - 1)
            if extent is not None:
                out.append(extent)
        live = set(names)
        for name in [n for n in self._growing if n.startswith(prefix) and n not in live]:
            del self._growing[name]
        return out

    def bounds(self) -> dict[int, tuple[int, int]]:
        """Per partition: the oldest retained offset and the offset after the last readable one."""
        out = {}
        for p in range(self.partitions):
            extents = self.extents(p)
            if not extents:
                out[p] = (0, 0)
            else:
                out[p] = (extents[0].base_offset, extents[-1].next_offset)
        return out

    def offsets_at(self, ms: int) -> dict[int, int]:
        """Per partition: the first offset written at or after `ms` (epoch ms), or the
        partition's end when none was. Batches are looked at in offset order, so a
        clock that stepped back never hides a later batch."""
        out = {}
        for p in range(self.partitions):
            extents = self.extents(p)
            out[p] = extents[-1].next_offset if extents else 0
            for extent in extents:
                i = bisect_left(extent.stamps, ms)
                if i < len(extent.stamps):
                    out[p] = max(self._first_at(extent, i, ms), extent.base_offset)
                    break
        return out

    def _first_at(self, extent: Extent, i: int, ms: int) -> int:
        """The first offset written at or after `ms` in `extent`, whose entry `i` is the
        first known to be: an index may list only some batches (on object storage, one
        per chunk), so the batches between entry i-1 and entry i are looked at too."""
        if i == 0:
            return extent.bases[0]
        reader = self.storage.open_read(extent.name)
        try:
            found = first_stamped_at(
                reader.read, extent.name, extent.positions[i - 1], extent.positions[i], ms
            )
        finally:
            reader.close()
        if found is not None:
            return found
        return extent.bases[i]

    def slices(
        self,
        start: dict[int, int],
        end: dict[int, int],
        bytes_max: int = limits.read_task_bytes_max_default,
    ) -> list[SegmentSlice]:
        """Slices covering offsets [start[p], end[p]) of each partition, each within one
        segment and holding about `bytes_max` bytes at most (at least one batch)."""
        out: list[SegmentSlice] = []
        for p in sorted(start):
            if end.get(p, 0) <= start[p]:
                continue
            for extent in self.extents(p):
                lo, hi = max(start[p], extent.base_offset), min(end[p], extent.next_offset)
                if lo < hi:
                    out.extend(_cut(self.topic, p, extent, lo, hi, bytes_max))
        return out

    # ------------------------------------------------------------ segments

    def _check_incarnation(self, prefix: str, first: str) -> None:
        """Forget what was learned of the partition at `prefix` when it is not the one
        it was: its oldest segment now begins earlier than before, or is the same
        file name with another header (made at another time). Retention moves the
        oldest segment on, never back."""
        try:
            reader = self.storage.open_read(first)
        except StorageError:
            return  # deleted since it was listed: looked at again next time
        try:
            header = reader.read(0, SEGMENT_HEADER_BYTES)
        finally:
            reader.close()
        known = self._firsts.get(prefix)
        self._firsts[prefix] = (first, header)
        if known is None or (known[0] < first) or known == (first, header):
            return
        self._sealed = {k: v for k, v in self._sealed.items() if not k[0].startswith(prefix)}
        for name in [n for n in self._growing if n.startswith(prefix)]:
            del self._growing[name]

    def _extent(self, prefix: str, name: str, last: bool) -> Extent | None:
        base = base_of(name)
        try:
            reader = self.storage.open_read(name)
        except StorageError:
            return None  # deleted by retention since it was listed
        try:
            size = reader.size()
            known = self._sealed.get((name, size))
            if known is not None:
                return known
            sealed = _read_seal(reader, name, base, size)
            if sealed is not None:
                self._sealed[(name, size)] = sealed
                self._growing.pop(name, None)
                return sealed
            if not last:
                raise CorruptData(f"{name}: an older segment carries no valid seal")
            return self._active(prefix, name, base, reader, size)
        finally:
            reader.close()

    def _active(self, prefix: str, name: str, base: int, reader: ReadFile, size: int) -> Extent:
        """The acknowledged part of the active segment: up to its durable mark; without
        one (object storage), its whole batches up to the synced size."""
        mark = read_durable_mark(self.storage, prefix)
        # The size again, after the mark: the owner writes the batches before the mark
        # that counts them, so the file now holds all the mark counts. (With the size
        # from before, a mark written meanwhile counted batches past it.)
        size = max(size, reader.size())
        end_bytes, end_offset = size, None
        if mark is not None and mark.segment_base >= base:
            if mark.segment_base == base:
                end_bytes, end_offset = min(mark.durable_bytes, size), mark.next_offset
            else:
                # The broker rolled past this segment after it was listed: it is sealed now.
                end_bytes = SEGMENT_HEADER_BYTES
        elif mark is not None:
            end_bytes = SEGMENT_HEADER_BYTES  # a new segment with no acknowledged batch yet
        growing = self._growing.get(name)
        if growing is None or growing.end_bytes > size:  # new, or a shorter file in its place
            growing = self._growing[name] = _Growing(base)
        if growing.end_bytes < end_bytes:
            _learn(reader, name, growing, end_bytes)
        if end_offset is not None and growing.next_offset < end_offset:
            raise CorruptData(
                f"{name}: batches end at offset {growing.next_offset} before "
                f"the durable mark's {end_offset}"
            )
        # The lists are shared, not copied (a stream asks on every trigger): they only
        # grow, by batches past this extent's end, which its slicing never reaches.
        return Extent(
            name,
            base,
            growing.next_offset,
            growing.end_bytes,
            growing.bases,
            growing.positions,
            growing.stamps,
        )


def _read_seal(reader: ReadFile, name: str, base: int, size: int) -> Extent | None:
    sealed = read_seal(reader, base, size)
    if isinstance(sealed, str):
        raise CorruptData(f"{name}: {sealed}")
    if sealed is None:
        return None
    return Extent(
        name,
        base,
        sealed.next_offset,
        sealed.data_end,
        [e.base_offset for e in sealed.entries],
        [e.position for e in sealed.entries],
        [e.timestamp for e in sealed.entries],
    )


def _learn(reader: ReadFile, name: str, growing: _Growing, end_bytes: int) -> None:
    """Learn where the batches of a growing segment lie, up to `end_bytes`, reading as
    little of it as may be: planning must not download what the tasks will read.

    On object storage every chunk or run starts with a batch (a sync writes whole
    batches), so one header per chunk or run is read (the index then lists those
    batches only; a task reads from one of them on), and in the last chunk, the
    headers of its batches. Elsewhere every header is read, hopping over bodies.
    """
    boundaries = getattr(reader, "boundaries", None)
    marks = [] if boundaries is None else boundaries()
    if not marks:
        _hop(reader, name, growing, end_bytes)
        return
    starts = [growing.end_bytes] + [b for b in marks if growing.end_bytes < b < end_bytes]
    for start in starts[:-1]:
        header = parse_header(reader.read(start, BATCH_HEADER_BYTES), 0, whole=False)
        if isinstance(header, str):
            raise CorruptData(f"{name} at byte {start}: {header}")
        growing.bases.append(header.base_offset)
        growing.positions.append(start)
        growing.stamps.append(header.timestamp)
        growing.next_offset = header.next_offset
    growing.end_bytes = starts[-1]
    _hop(reader, name, growing, end_bytes)


def _hop(reader: ReadFile, name: str, growing: _Growing, end_bytes: int) -> None:
    """Learn batches from their headers alone, one read per batch."""
    pos = growing.end_bytes
    while pos + BATCH_HEADER_BYTES <= end_bytes:
        head = reader.read(pos, BATCH_HEADER_BYTES)
        header = parse_header(head, 0, whole=False)
        if isinstance(header, str):
            if not any(head):
                return  # zeros: space reserved ahead of the data
            raise CorruptData(f"{name} at byte {pos}: {header}")
        if pos + header.length > end_bytes:
            return  # a batch not wholly synced yet
        growing.bases.append(header.base_offset)
        growing.positions.append(pos)
        growing.stamps.append(header.timestamp)
        growing.next_offset = header.next_offset
        pos += header.length
        growing.end_bytes = pos


def _walk(reader: ReadFile, name: str, growing: _Growing, end_bytes: int) -> None:
    """Learn the batches of a growing segment from `growing.end_bytes` up to `end_bytes`
    from their headers alone (their checksums are checked when they are read)."""
    pos = growing.end_bytes
    while pos < end_bytes:
        window = reader.read(pos, min(limits.read_window_bytes, end_bytes - pos))
        at = 0
        while len(window) - at >= BATCH_HEADER_BYTES:
            header = parse_header(window, at, whole=False)
            if isinstance(header, str):
                if not any(window[at : at + BATCH_HEADER_BYTES]):
                    return  # zeros: space reserved ahead of the data
                raise CorruptData(f"{name} at byte {pos + at}: {header}")
            if pos + at + header.length > end_bytes:
                return  # a batch not wholly synced yet
            growing.bases.append(header.base_offset)
            growing.positions.append(pos + at)
            growing.stamps.append(header.timestamp)
            growing.next_offset = header.next_offset
            at += header.length
            growing.end_bytes = pos + at
        if at == 0:
            return  # a part of a header: not synced yet
        pos += at


def _cut(
    topic: str, partition: int, extent: Extent, lo: int, hi: int, bytes_max: int
) -> Iterator[SegmentSlice]:
    """Slices of one segment holding offsets [lo, hi), cut at batch boundaries."""
    bases, positions = extent.bases, extent.positions
    first = max(0, bisect_right(bases, lo) - 1)
    stop = bisect_right(bases, hi - 1)  # batches [first, stop) hold the offsets
    i = first
    while i < stop:
        j = i + 1
        while j < stop and positions[j] - positions[i] < bytes_max:
            j += 1
        byte_end = positions[j] if j < len(positions) else extent.end_bytes
        slice_lo = max(lo, bases[i])
        slice_hi = min(hi, bases[j]) if j < len(bases) else hi
        yield SegmentSlice(
            topic, partition, extent.name, slice_lo, slice_hi, positions[i], byte_end
        )
        i = j


def read_slice(
    storage: Storage, piece: SegmentSlice, window_bytes: int = limits.read_window_bytes
) -> Iterator[tuple[bytes, list[tuple[int, BatchHeader]]]]:
    """The batches of `piece`, verified: per window read, (its bytes, [(position, header)])
    of the whole batches in it that hold offsets below `piece.end_offset`.

    Raises CorruptData for a batch that fails its checksum or does not hold
    together, StorageError if the segment is gone (deleted by retention).
    """
    reader = storage.open_read(piece.name)
    try:
        pos = piece.byte_start  # where `window` starts in the segment
        window = b""
        need = window_bytes
        while True:
            until = min(piece.byte_end, pos + need)
            if pos + len(window) < until:
                # Only bytes not read yet: a batch cut by the last window is kept, not
                # fetched again (on S3 every byte read is a byte downloaded).
                more = reader.read(pos + len(window), until - pos - len(window))
                if not more:
                    raise CorruptData(
                        f"{piece.name} ends at byte {pos + len(window)}, inside its slice"
                    )
                window += more
            batches, used, done = _whole_batches(window, pos, piece)
            if batches:
                yield window, batches
            if done:
                return
            if not batches:
                if pos + len(window) >= piece.byte_end:
                    raise CorruptData(f"{piece.name} at byte {pos}: incomplete batch")
                header = parse_header(window, 0, whole=False)
                # A batch larger than the window: read all of it (or its header first).
                need = header.length if not isinstance(header, str) else len(window) + need
                continue
            window = window[used:]
            pos += used
            need = window_bytes
    finally:
        reader.close()


def _whole_batches(
    window: bytes, pos: int, piece: SegmentSlice
) -> tuple[list[tuple[int, BatchHeader]], int, bool]:
    """The verified whole batches at the start of `window` (read at byte `pos`), the
    bytes they take, and whether the slice's last offset was reached."""
    batches: list[tuple[int, BatchHeader]] = []
    at = 0
    while at < len(window):
        header = parse_header(window, at, whole=False)
        if isinstance(header, str):
            if len(window) - at < BATCH_HEADER_BYTES and pos + len(window) < piece.byte_end:
                break  # the window cut a header: the next window starts with it
            raise CorruptData(f"{piece.name} at byte {pos + at}: {header}")
        if header.base_offset >= piece.end_offset:
            return batches, at, True
        if at + header.length > len(window):
            if pos + len(window) >= piece.byte_end:
                raise CorruptData(f"{piece.name} at byte {pos + at}: incomplete batch")
            break
        if not verify(window, at, header):
            raise CorruptData(
                f"{piece.name} at byte {pos + at}: checksum mismatch (offset {header.base_offset})"
            )
        batches.append((at, header))
        at += header.length
    return batches, at, pos + at >= piece.byte_end


def read_records(storage: Storage, piece: SegmentSlice) -> Iterator[Record]:
    """The records of `piece`, one by one (for small logs; Spark reads columns)."""
    for window, batches in read_slice(storage, piece):
        for pos, header in batches:
            records, _ = decode_records(
                window, pos, header, piece.topic, piece.partition, piece.start_offset
            )
            for record in records:
                if record.offset >= piece.end_offset:
                    return
                yield record
