"""Segment framing: the file header, and the seal that ends an immutable segment.

A segment is `header, batch, batch, ...` while it is active, and
`header, batch, ..., index block, trailer` once sealed. The trailer sits at a
fixed distance from the end so a reader (or an object-store range GET) finds
the index without scanning. Layout: docs/FORMAT.md.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

import crc32c

from brook.codec.batch import BATCH_HEADER_BYTES, parse_header
from brook.errors import CorruptData

SEGMENT_MAGIC = b"BROOKSEG"
SEGMENT_VERSION = 1
INDEX_KIND = b"INDX"
TRAILER_MAGIC = b"BROOKEND"

# magic, version, reserved, partition, base_offset, created_ms, crc
_FILE_HEADER = struct.Struct("<8sHHIQqI")
SEGMENT_HEADER_BYTES = _FILE_HEADER.size  # 36
# kind, length, crc, entry count, next_offset
_INDEX_HEADER = struct.Struct("<4sIIIQ")
# base_offset, position, timestamp
_INDEX_ENTRY = struct.Struct("<QQq")
# index position, magic
_TRAILER = struct.Struct("<Q8s")
TRAILER_BYTES = _TRAILER.size  # 16


class SegmentHeader(NamedTuple):
    partition: int
    base_offset: int
    created_ms: int


class IndexEntry(NamedTuple):
    """Where one batch starts: its first offset, byte position and timestamp."""

    base_offset: int
    position: int
    timestamp: int


def encode_segment_header(partition: int, base_offset: int, created_ms: int) -> bytes:
    head = _FILE_HEADER.pack(
        SEGMENT_MAGIC, SEGMENT_VERSION, 0, partition, base_offset, created_ms, 0
    )
    crc = crc32c.crc32c(head[:-4])
    return head[:-4] + struct.pack("<I", crc)


def decode_segment_header(buf: bytes) -> SegmentHeader | str:
    """The segment's header, or a string saying why these bytes are not one."""
    if len(buf) < SEGMENT_HEADER_BYTES:
        return "incomplete segment header"
    magic, version, _, partition, base, created, crc = _FILE_HEADER.unpack_from(buf, 0)
    if magic != SEGMENT_MAGIC:
        return "not a Brook segment (bad magic)"
    if crc32c.crc32c(buf[: SEGMENT_HEADER_BYTES - 4]) != crc:
        return "segment header checksum mismatch"
    if version != SEGMENT_VERSION:
        return f"unsupported segment version {version}"
    return SegmentHeader(partition, base, created)


def encode_seal(entries: list[IndexEntry], next_offset: int, index_position: int) -> bytes:
    """The index block and trailer appended to a segment to seal it."""
    body = b"".join(_INDEX_ENTRY.pack(*e) for e in entries)
    length = _INDEX_HEADER.size + len(body)
    head = _INDEX_HEADER.pack(INDEX_KIND, length, 0, len(entries), next_offset)
    crc = crc32c.crc32c(body, crc32c.crc32c(head[12:]))
    head = head[:8] + struct.pack("<I", crc) + head[12:]
    return head + body + _TRAILER.pack(index_position, TRAILER_MAGIC)


def seal_position(trailer: bytes, file_bytes: int) -> int | None:
    """Where the seal starts, from a file's last TRAILER_BYTES; None if it has no trailer."""
    if len(trailer) != TRAILER_BYTES:
        return None
    index_position, magic = _TRAILER.unpack(trailer)
    if (
        magic != TRAILER_MAGIC
        or not SEGMENT_HEADER_BYTES <= index_position < file_bytes - TRAILER_BYTES
    ):
        return None
    return int(index_position)


def decode_seal(tail: bytes, file_bytes: int) -> tuple[list[IndexEntry], int, int] | None:
    """Read a seal from the last bytes of a segment file of `file_bytes` bytes.

    `tail` must be the file's last len(tail) bytes and hold the whole index.
    Returns (entries, next_offset, index_position), or None when the file
    carries no valid seal (it is still active, or its sealing was torn).
    """
    if len(tail) < TRAILER_BYTES:
        return None
    index_position, magic = _TRAILER.unpack_from(tail, len(tail) - TRAILER_BYTES)
    if magic != TRAILER_MAGIC:
        return None
    length = file_bytes - TRAILER_BYTES - index_position
    start = len(tail) - TRAILER_BYTES - length
    if not (index_position >= SEGMENT_HEADER_BYTES and start >= 0 and length >= _INDEX_HEADER.size):
        return None
    kind, stored_length, crc, count, next_offset = _INDEX_HEADER.unpack_from(tail, start)
    if kind != INDEX_KIND or stored_length != length:
        return None
    if length != _INDEX_HEADER.size + count * _INDEX_ENTRY.size:
        return None
    if crc32c.crc32c(tail[start + 12 : start + length]) != crc:
        return None
    entries = [
        IndexEntry(
            *_INDEX_ENTRY.unpack_from(tail, start + _INDEX_HEADER.size + i * _INDEX_ENTRY.size)
        )
        for i in range(count)
    ]
    return entries, next_offset, index_position


# kind, version, reserved, segment base_offset, durable bytes, next_offset, crc
_DURABLE_MARK = struct.Struct("<4sHHQQQI")
DURABLE_MARK_KIND = b"DURB"
DURABLE_MARK_BYTES = _DURABLE_MARK.size  # 36


class DurableMark(NamedTuple):
    """How much of a partition's active segment is durable, for readers outside the broker."""

    segment_base: int
    """Base offset of the segment it describes (the active one when written)."""
    durable_bytes: int
    """Bytes of whole, acknowledged batches from the start of that segment's file."""
    next_offset: int
    """The offset after the last acknowledged record."""


def encode_durable_mark(mark: DurableMark) -> bytes:
    head = _DURABLE_MARK.pack(DURABLE_MARK_KIND, 1, 0, *mark, 0)
    return head[:-4] + struct.pack("<I", crc32c.crc32c(head[:-4]))


def decode_durable_mark(buf: bytes) -> DurableMark | None:
    """The mark in `buf`, or None when it is not one (torn by a concurrent write, or damaged)."""
    if len(buf) != DURABLE_MARK_BYTES:
        return None
    kind, version, _, base, durable, next_offset, crc = _DURABLE_MARK.unpack(buf)
    if kind != DURABLE_MARK_KIND or version != 1 or crc32c.crc32c(buf[:-4]) != crc:
        return None
    return DurableMark(base, durable, next_offset)


def first_stamped_at(
    read: Callable[[int, int], bytes], name: str, start: int, stop: int, ms: int
) -> int | None:
    """The base offset of the first batch stamped at or after `ms` among the batches
    from byte `start` up to byte `stop` of a segment (read through `read(position,
    size)`), or None. For sparse indexes: only the headers are read, hopping over
    bodies. Raises CorruptData if a header there is not one."""
    pos = start
    while pos + BATCH_HEADER_BYTES <= stop:
        header = parse_header(read(pos, BATCH_HEADER_BYTES), 0, whole=False)
        if isinstance(header, str):
            raise CorruptData(f"{name} at byte {pos}: {header}")
        if header.timestamp >= ms:
            return header.base_offset
        pos += header.length
    return None
