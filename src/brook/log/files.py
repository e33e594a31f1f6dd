"""Segment files on storage: read a seal, open by recovery, create, write whole; the
durable mark. Shared by the broker's partitions (log/partition.py) and by readers
outside the broker (log/view.py), so both read a segment file the same way.

The byte layout is in docs/FORMAT.md; the codec encodes and decodes it.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from brook import layout, limits
from brook.codec import (
    SEGMENT_HEADER_BYTES,
    TRAILER_BYTES,
    IndexEntry,
    decode_seal,
    decode_segment_header,
    encode_batch,
    encode_seal,
    encode_segment_header,
)
from brook.codec.batch import Columns
from brook.codec.segment import (
    DURABLE_MARK_BYTES,
    DurableMark,
    decode_durable_mark,
    encode_durable_mark,
    seal_position,
)
from brook.errors import CorruptData
from brook.log.compaction import Run
from brook.log.recovery import scan_segment
from brook.log.segment import Segment
from brook.storage import ReadFile, Storage

log = logging.getLogger("brook.log")


class Seal(NamedTuple):
    """What a sealed segment's header and seal say."""

    created_ms: int
    entries: list[IndexEntry]
    next_offset: int
    data_end: int
    """Where the batches end and the seal starts."""


def base_of(name: str) -> int:
    """The base offset in a segment's name (docs/FORMAT.md)."""
    return int(name.rsplit("/", 1)[1].split(".")[0])


def read_seal(reader: ReadFile, base: int, size: int) -> Seal | str | None:
    """The segment's seal when it carries a valid one; None when it has none (it is
    active, or was cut short); why its header is not valid, as a string."""
    header = decode_segment_header(reader.read(0, SEGMENT_HEADER_BYTES))
    if isinstance(header, str) or header.base_offset != base:
        return header if isinstance(header, str) else "base offset mismatch"
    if size < SEGMENT_HEADER_BYTES + TRAILER_BYTES:
        return None
    start = seal_position(reader.read(size - TRAILER_BYTES, TRAILER_BYTES), size)
    if start is None:
        return None
    sealed = decode_seal(reader.read(start, size - start), size)
    if sealed is None:
        return None
    entries, next_offset, data_end = sealed
    return Seal(header.created_ms, entries, next_offset, data_end)


def read_durable_mark(storage: Storage, prefix: str) -> DurableMark | None:
    """The partition's durable mark (None when there is none); read again while a
    rewrite by the owner makes it fail its checksum. Raises CorruptData."""
    for _ in range(limits.mark_read_attempts):
        raw = storage.read_all(layout.durable_mark(prefix))
        if raw is None:
            return None
        mark = decode_durable_mark(raw[:DURABLE_MARK_BYTES])
        if mark is not None:
            return mark
    raise CorruptData(f"{layout.durable_mark(prefix)} does not hold a valid mark")


def write_durable_mark(storage: Storage, prefix: str, active: Segment) -> None:
    """Tell readers outside the broker how much of the active segment is acknowledged.

    Written after the sync that made it so, and never moved back, so it can lag
    the truth but never lead it (docs/FORMAT.md, "Durable mark")."""
    mark = DurableMark(active.base_offset, active.durable_bytes, active.next_offset)
    storage.write_hint(layout.durable_mark(prefix), encode_durable_mark(mark))


def acknowledged_end(storage: Storage, prefix: str, base: int, size: int) -> int:
    """How much of the active segment an outside reader may read: up to its durable
    mark (what the owner acknowledged), or all of it where there is no mark (object
    storage, where only synced chunks exist)."""
    mark = read_durable_mark(storage, prefix)
    if mark is not None and mark.segment_base == base:
        return min(size, mark.durable_bytes)
    if mark is not None and mark.segment_base < base:
        return SEGMENT_HEADER_BYTES  # started after the mark: nothing acknowledged yet
    return size


def create_segment(
    storage: Storage, prefix: str, partition: int, base: int, now_ms: int
) -> Segment:
    """A new, empty active segment, its header durable."""
    name = layout.segment(prefix, base)
    header = encode_segment_header(partition, base, now_ms)
    segment = Segment(storage, name, base, now_ms, [], len(header), base, sealed=False)
    segment.appender = storage.create_appendable(name, header)
    return segment


def encode_segment(
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


def open_segment(
    storage: Storage,
    name: str,
    active: bool,
    read_only: bool = False,
    mark: DurableMark | None = None,
) -> Segment | None:
    """Open one segment file: from its seal if it has one, else by a recovery scan.

    `read_only` looks without changing anything, as an outside reader may: the
    active segment up to what its owner acknowledged, never recovered or started
    again, and an older segment without a seal is damage. `mark` is the
    partition's durable mark, if known: an active segment whose every valid byte
    it covers needs no sync after recovery.
    """
    base = base_of(name)
    reader = storage.open_read(name)
    try:
        size = reader.size()
        found = read_seal(reader, base, size)
        if isinstance(found, str):
            reader.close()
            if active and read_only:
                return None  # its owner is creating it, or will start it again
            if active:
                # A crash while the file was being created: it never held a record.
                log.warning("%s: %s; starting it again", name, found)
                storage.delete(name)
                return None
            raise CorruptData(f"{name}: {found}")
        if found is not None:
            reader.close()
            return Segment(
                storage,
                name,
                base,
                found.created_ms,
                found.entries,
                found.data_end,
                found.next_offset,
                True,
            )
        if read_only:
            if not active:
                raise CorruptData(f"{name}: an older segment carries no valid seal")
            size = acknowledged_end(storage, name.rsplit("/", 1)[0] + "/", base, size)
        buf = reader.read(0, size)
    except BaseException:
        reader.close()
        raise
    segment = _recovered(storage, name, base, buf, active, read_only, mark)
    # The active segment is read again at once (the idempotency keys of its recent
    # batches): its read handle stays (a borrowed descriptor, closed when idle).
    segment.adopt_reader(reader)
    return segment


def _recovered(
    storage: Storage,
    name: str,
    base: int,
    buf: bytes,
    active: bool,
    read_only: bool,
    mark: DurableMark | None = None,
) -> Segment:
    """A segment without a seal, as far as its batches are whole and valid; the
    owner cuts the rest off the file (and says what it dropped)."""
    header = decode_segment_header(buf[:SEGMENT_HEADER_BYTES])
    assert not isinstance(header, str), "read_seal checked the header"
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
    size = len(buf)
    zero_tail = buf.count(0, scan.valid_bytes) == size - scan.valid_bytes
    if scan.problem is not None and not zero_tail:
        log.warning(
            "recovery %s: kept offsets %d..%d, dropped %d bytes after byte %d: %s",
            name,
            base,
            scan.next_offset - 1,
            size - scan.valid_bytes,
            scan.valid_bytes,
            scan.problem,
        )
    if active:
        segment.appender = storage.open_appendable(name)
        if scan.valid_bytes < size:
            segment.appender.truncate(scan.valid_bytes)  # durably
        elif not _all_synced(mark, base, scan.valid_bytes):
            # Bytes written before a crash but never synced are in the page cache only:
            # make them durable before anyone can read them.
            segment.appender.sync()
    return segment


def _all_synced(mark: DurableMark | None, base: int, valid_bytes: int) -> bool:
    """Whether the durable mark says every valid byte of the active segment at `base`
    was synced: it is written only after the sync that made its bytes durable, so it
    never claims more than the disk holds (a torn or lost mark claims nothing). Saves
    a sync per partition at start (a tenth of a millisecond each, 100,000 topics)."""
    return mark is not None and mark.segment_base == base and mark.durable_bytes == valid_bytes
