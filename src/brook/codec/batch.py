"""Record batches: the unit of writing, checksumming and reading.

A batch is columnar so that both ends are cheap: writing joins the values into
one blob and writes an array of their end positions; reading slices that blob.
The same arrays are Arrow-style offset buffers, which the Spark reader uses
without a per-record loop. Layout: docs/FORMAT.md, "Record batch".

Decoding checks every length and offset against the bytes actually present
before using it, and verifies the CRC32C before looking at the body at all.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate, pairwise
from operator import add, sub
from typing import NamedTuple

import crc32c
import msgspec

from brook import limits
from brook.errors import CorruptData
from brook.records import Record

BATCH_KIND = b"BTCH"
BATCH_VERSION = 1
FLAG_KEYS = 1
FLAG_HEADERS = 2
FLAG_IDEMPOTENCY = 4
FLAGS_KNOWN = FLAG_KEYS | FLAG_HEADERS | FLAG_IDEMPOTENCY

# kind, length, crc, version, flags, base_offset, count, reserved, timestamp, reserved
_HEADER = struct.Struct("<4sIIHHQIIqQ")
BATCH_HEADER_BYTES = _HEADER.size  # 48
_CRC_START = 12  # the checksum covers everything after the crc field

assert array("I").itemsize == 4, "u32 arrays must be 4 bytes"

_encode_headers = msgspec.msgpack.Encoder().encode
_decode_headers = msgspec.msgpack.Decoder(dict[str, bytes]).decode


class BatchHeader(NamedTuple):
    """The fixed part of a batch, as read from storage."""

    length: int
    crc: int
    flags: int
    base_offset: int
    record_count: int
    timestamp: int

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count


class Columns:
    """Records to encode, held as columns: the shape the batch is written in.

    `keys`, `headers` and `idempotency` are None when no record has one, which
    is the common case and keeps encoding to a join of the values.
    """

    __slots__ = ("bytes", "headers", "idempotency", "keys", "value_ends", "values")

    def __init__(
        self,
        values: list[bytes],
        keys: list[bytes | None] | None = None,
        headers: list[dict[str, bytes] | None] | None = None,
        idempotency: list[bytes | None] | None = None,
        size_bytes: int = 0,
    ) -> None:
        self.values = values
        self.keys = keys
        self.headers = headers
        self.idempotency = idempotency
        self.bytes = size_bytes
        self.value_ends: array[int] | None = None
        """The values' offsets column, when the caller already computed it."""

    def __len__(self) -> int:
        return len(self.values)

    @classmethod
    def from_records(
        cls, records: Sequence[Record], idempotency: Sequence[bytes | None] | None = None
    ) -> Columns:
        keys = [r.key for r in records]
        headers = [r.headers or None for r in records]
        n = len(records)
        return cls(
            [r.value for r in records],
            None if keys.count(None) == n else keys,
            None if headers.count(None) == n else headers,
            None
            if idempotency is None or list(idempotency).count(None) == n
            else list(idempotency),
        )

    def select(self, indexes: Sequence[int]) -> Columns:
        """The records at `indexes`, in that order."""
        picked = Columns([self.values[i] for i in indexes])
        for name in ("keys", "headers", "idempotency"):
            column = getattr(self, name)
            if column is not None:
                chosen = [column[i] for i in indexes]
                setattr(picked, name, None if chosen.count(None) == len(chosen) else chosen)
        picked.bytes = sum(map(len, picked.values))
        return picked

    @classmethod
    def concat(cls, parts: Sequence[Columns]) -> Columns:
        """One Columns holding every record of `parts`, in order."""
        if len(parts) == 1:
            return parts[0]
        out = cls([], size_bytes=sum(p.bytes for p in parts))
        for name in ("keys", "headers", "idempotency"):
            if any(getattr(p, name) is not None for p in parts):
                joined: list[object] = []
                for p in parts:
                    column = getattr(p, name)
                    joined.extend(column if column is not None else [None] * len(p))
                setattr(out, name, joined)
        for p in parts:
            out.values.extend(p.values)
        return out


def _ends(blobs: Sequence[bytes]) -> bytes:
    """Offsets array for a column: 0, then the end of each item in the joined blob."""
    return array("I", accumulate(map(len, blobs), initial=0)).tobytes()


def encode_batch(
    base_offset: int,
    timestamp: int,
    records: Sequence[Record] | Columns,
    idempotency_keys: Sequence[bytes | None] | None = None,
) -> list[bytes]:
    """Encode records as one batch; returns the parts to write in order (for writev).

    Offsets are implicit: record i gets base_offset + i. `idempotency_keys`, when
    given with a sequence of Records, holds one entry per record (None for none).
    """
    columns = (
        records if isinstance(records, Columns) else Columns.from_records(records, idempotency_keys)
    )
    count = len(columns)
    assert 0 < count <= limits.batch_records_max
    assert base_offset >= 0
    flags = 0
    ends = columns.value_ends
    offsets = [ends.tobytes() if ends is not None else _ends(columns.values)]
    blobs = [b"".join(columns.values)]
    presence = b""
    if columns.keys is not None:
        flags |= FLAG_KEYS
        presence = bytes(k is not None for k in columns.keys)
        key_bytes = [k or b"" for k in columns.keys]
        offsets.append(_ends(key_bytes))
        blobs.append(b"".join(key_bytes))
    if columns.headers is not None:
        flags |= FLAG_HEADERS
        encoded = [_encode_headers(h) if h else b"" for h in columns.headers]
        offsets.append(_ends(encoded))
        blobs.append(b"".join(encoded))
    if columns.idempotency is not None:
        assert len(columns.idempotency) == count
        flags |= FLAG_IDEMPOTENCY
        idem = [k or b"" for k in columns.idempotency]
        offsets.append(_ends(idem))
        blobs.append(b"".join(idem))
    body = [*offsets, presence, *blobs]
    length = BATCH_HEADER_BYTES + sum(map(len, body))
    if length > limits.batch_bytes_format_max:
        raise CorruptData(f"batch of {length} bytes exceeds the format maximum")
    head = _HEADER.pack(
        BATCH_KIND, length, 0, BATCH_VERSION, flags, base_offset, count, 0, timestamp, 0
    )
    crc = crc32c.crc32c(head[_CRC_START:])
    for part in body:
        crc = crc32c.crc32c(part, crc)
    head = head[:8] + struct.pack("<I", crc) + head[_CRC_START:]
    return [head, *body]


def parse_header(buf: bytes | memoryview, pos: int, whole: bool = True) -> BatchHeader | str:
    """Read and sanity-check the batch header at `pos`.

    Returns the header, or a string saying why these bytes are not a whole batch
    header (too short, wrong kind, impossible length) or, when `whole`, not a
    whole batch. Does not check the CRC.
    """
    if len(buf) - pos < BATCH_HEADER_BYTES:
        return "incomplete batch header"
    kind, length, crc, version, flags, base, count, _, ts, _ = _HEADER.unpack_from(buf, pos)
    if kind != BATCH_KIND:
        return f"not a batch (kind {bytes(kind)!r})"
    if version != BATCH_VERSION:
        return f"unsupported batch version {version}"
    if flags & ~FLAGS_KNOWN:
        return f"unknown batch flags {flags:#x}"
    if not 0 < count <= limits.batch_records_max:
        return f"impossible record count {count}"
    if not BATCH_HEADER_BYTES + 4 * (count + 1) <= length <= limits.batch_bytes_format_max:
        return f"impossible batch length {length}"
    if whole and len(buf) - pos < length:
        return "incomplete batch"
    return BatchHeader(length, crc, flags, base, count, ts)


def verify(buf: bytes | memoryview, pos: int, header: BatchHeader) -> bool:
    """True when the batch's CRC32C matches its bytes."""
    view = memoryview(buf)[pos + _CRC_START : pos + header.length]
    return bool(crc32c.crc32c(view) == header.crc)


def scan_batches(
    buf: bytes | memoryview, start: int, expect_offset: int | None
) -> Iterator[tuple[int, BatchHeader] | str]:
    """Walk whole, checksummed batches from `start`; yield (position, header).

    Stops after yielding a string describing the first problem: a torn or
    corrupt batch, a checksum mismatch, or (when `expect_offset` is given) a
    batch that does not start where the one before it ended. Stops silently at
    the exact end of `buf`. Without `expect_offset`, offsets are not checked:
    compacted segments have gaps between batches, and a client's batches carry
    offsets the broker ignores.
    """
    check = expect_offset is not None
    pos = start
    while pos < len(buf):
        header = parse_header(buf, pos)
        if isinstance(header, str):
            yield f"{header} at byte {pos}"
            return
        if not verify(buf, pos, header):
            yield f"checksum mismatch in batch at byte {pos} (offset {header.base_offset})"
            return
        if expect_offset is not None and header.base_offset != expect_offset:
            yield f"batch at byte {pos} starts at offset {header.base_offset}, expected {expect_offset}"
            return
        yield pos, header
        if check:
            expect_offset = header.next_offset
        pos += header.length


def _column(buf: bytes, at: int, end: int, count: int) -> tuple[list[int], int]:
    """Read a (count+1) offsets array at `at`; check it is an increasing cut from 0."""
    stop = at + 4 * (count + 1)
    if stop > end:
        raise CorruptData("batch column runs past the batch")
    ends = array("I")
    ends.frombytes(buf[at:stop])
    column = ends.tolist()
    if column[0] != 0 or any(map(int.__gt__, column, column[1:])):
        raise CorruptData("batch column offsets are not increasing")
    return column, stop


COLUMN_FLAGS = (FLAG_KEYS, FLAG_HEADERS, FLAG_IDEMPOTENCY)
"""The optional columns, in the order they are laid out."""


class _Layout(NamedTuple):
    """Where each column of a verified batch lies: offsets lists and blob starts."""

    values: list[int]
    columns: dict[int, list[int]]
    presence: bytes
    starts: dict[int, int]


def _layout(buf: bytes, pos: int, header: BatchHeader) -> _Layout:
    """Parse the offsets columns of a verified batch and check that its blobs fill it exactly."""
    count, flags = header.record_count, header.flags
    end = pos + header.length
    at = pos + BATCH_HEADER_BYTES
    values, at = _column(buf, at, end, count)
    columns: dict[int, list[int]] = {}
    for flag in COLUMN_FLAGS:
        if flags & flag:
            columns[flag], at = _column(buf, at, end, count)
    presence = b""
    if flags & FLAG_KEYS:
        presence = buf[at : at + count]
        at += count
    # Blobs follow in column order; together they must fill the batch exactly.
    starts: dict[int, int] = {0: at}
    at += values[-1]
    for flag, column in columns.items():
        starts[flag] = at
        at += column[-1]
    if at != end:
        raise CorruptData("batch blobs do not fill the batch exactly")
    return _Layout(values, columns, presence, starts)


def _values_window(
    buf: bytes, pos: int, header: BatchHeader, first: int, stop: int
) -> tuple[list[int], int]:
    """For a verified batch of values alone: the value ends of records first..stop
    (stop+1 - first entries, so record i spans ends[i-first]..ends[i-first+1]) and
    where the values blob starts. Checks what it reads: increasing, inside the batch."""
    count = header.record_count
    column = pos + BATCH_HEADER_BYTES
    v0 = column + 4 * (count + 1)
    end = pos + header.length
    if v0 > end:
        raise CorruptData("batch column runs past the batch")
    ends = array("I")
    ends.frombytes(buf[column + 4 * first : column + 4 * (stop + 1)])
    window = ends.tolist()
    (total,) = struct.unpack_from("<I", buf, column + 4 * count)
    if v0 + total != end:
        raise CorruptData("batch blobs do not fill the batch exactly")
    if (first == 0 and window[0] != 0) or any(map(int.__gt__, window, window[1:])):
        raise CorruptData("batch column offsets are not increasing")
    if window[-1] > total:
        raise CorruptData("batch column runs past the values")
    return window, v0


def _slices(buf: bytes, start: int, ends: list[int]) -> list[bytes]:
    return [buf[start + a : start + b] for a, b in pairwise(ends)]


def decode_columns(buf: bytes, pos: int, header: BatchHeader) -> Columns:
    """The records of a verified batch as Columns, ready to append again.

    For batches that arrive from clients: no Record objects are built, and a
    batch of values alone costs one slice per record. An empty idempotency key
    means none. Raises CorruptData when the body does not hold together.
    """
    layout = _layout(buf, pos, header)
    columns = Columns(_slices(buf, layout.starts[0], layout.values))
    columns.value_ends = array("I", layout.values)
    if FLAG_KEYS in layout.columns:
        keys: list[bytes | None] = list(
            _slices(buf, layout.starts[FLAG_KEYS], layout.columns[FLAG_KEYS])
        )
        for i, present in enumerate(layout.presence):
            if not present:
                keys[i] = None
        columns.keys = keys
    if FLAG_HEADERS in layout.columns:
        encoded = _slices(buf, layout.starts[FLAG_HEADERS], layout.columns[FLAG_HEADERS])
        try:
            columns.headers = [_decode_headers(h) if h else None for h in encoded]
        except msgspec.DecodeError as exc:
            raise CorruptData(f"batch headers do not decode: {exc}") from None
    if FLAG_IDEMPOTENCY in layout.columns:
        idem = _slices(buf, layout.starts[FLAG_IDEMPOTENCY], layout.columns[FLAG_IDEMPOTENCY])
        columns.idempotency = [k or None for k in idem]
    return columns


class ClientBatch(NamedTuple):
    """One checked batch from a client: its flags, record count and body (all after the header)."""

    flags: int
    records: int
    body: memoryview


class ClientBatches:
    """Batches a client sent, appended as they are: only each header is rewritten
    (base offset, timestamp, CRC32C), so no record is decoded, sliced or joined.

    `plain` batches (values and keys only) may be appended this way; anything
    with headers or idempotency keys goes through `columns()` like any append.
    """

    __slots__ = ("batches", "bytes", "count", "keyed", "largest", "plain")

    idempotency = None
    """Never any: batches holding idempotency keys are not `plain`."""

    def __init__(self, batches: list[ClientBatch], sizes: list[int]) -> None:
        self.batches = batches
        self.count = sum(b.records for b in batches)
        self.bytes = sum(sizes)
        """Bytes of keys and values, as Columns.bytes counts them."""
        self.largest = max(sizes, default=0)
        """The largest record's key and value bytes."""
        self.keyed = any(b.flags & FLAG_KEYS for b in batches)
        self.plain = all(not b.flags & ~FLAG_KEYS for b in batches)

    def __len__(self) -> int:
        return self.count

    def columns(self) -> Columns:
        """The records as Columns, decoded."""
        parts = []
        for flags, count, body in self.batches:
            head = _HEADER.pack(BATCH_KIND, 0, 0, BATCH_VERSION, flags, 0, count, 0, 0, 0)
            buf = head + bytes(body)
            header = BatchHeader(len(buf), 0, flags, 0, count, 0)
            parts.append(decode_columns(buf, 0, header))
        return Columns.concat(parts)

    def encode(
        self, base_offset: int, timestamp: int
    ) -> list[tuple[int, list[bytes | memoryview]]]:
        """Each batch restamped with its offsets: (its base offset, its parts to write), in order."""
        assert self.plain
        out: list[tuple[int, list[bytes | memoryview]]] = []
        for flags, count, body in self.batches:
            length = BATCH_HEADER_BYTES + len(body)
            head = _HEADER.pack(
                BATCH_KIND, length, 0, BATCH_VERSION, flags, base_offset, count, 0, timestamp, 0
            )
            crc = crc32c.crc32c(body, crc32c.crc32c(head[_CRC_START:]))
            out.append((base_offset, [head[:8] + struct.pack("<I", crc) + head[_CRC_START:], body]))
            base_offset += count
        return out


def read_client_batches(body: bytes) -> ClientBatches:
    """The whole, checksummed batches of a request body (docs/PROTOCOL.md), checked
    to hold together; their offsets and timestamps are ignored. Raises CorruptData."""
    batches: list[ClientBatch] = []
    sizes: list[int] = []
    view = memoryview(body)
    for item in scan_batches(body, 0, None):
        if isinstance(item, str):
            raise CorruptData(item)
        pos, header = item
        layout = _layout(body, pos, header)
        values = layout.values
        record_sizes = map(sub, values[1:], values[:-1])
        keys = layout.columns.get(FLAG_KEYS)
        if keys is not None:
            record_sizes = map(add, record_sizes, map(sub, keys[1:], keys[:-1]))
        sizes.extend(record_sizes)
        body_start = pos + BATCH_HEADER_BYTES
        batches.append(
            ClientBatch(header.flags, header.record_count, view[body_start : pos + header.length])
        )
    return ClientBatches(batches, sizes)


def decode_records(
    buf: bytes,
    pos: int,
    header: BatchHeader,
    topic: str,
    partition: int,
    start_offset: int = 0,
    want_idempotency: bool = False,
    limit: int | None = None,
) -> tuple[list[Record], list[bytes | None] | None]:
    """Decode the records of a verified batch whose offset is >= start_offset
    (at most `limit` of them).

    Returns the records and, when asked for, their idempotency keys (None where
    a record has none). Raises CorruptData when the body does not hold
    together; never returns bytes from outside the batch.
    """
    count, flags = header.record_count, header.flags
    skip = max(0, start_offset - header.base_offset)
    stop = count if limit is None else min(count, skip + limit)
    offsets = range(header.base_offset + skip, header.base_offset + stop)
    ts = header.timestamp
    if skip >= stop:
        return [], [] if want_idempotency else None
    if not flags and not want_idempotency:
        # Values alone (the common case): read only the part of the column wanted.
        ends, v0 = _values_window(buf, pos, header, skip, stop)
        return [
            Record(buf[v0 + a : v0 + b], None, None, topic, partition, offset, ts)
            for offset, a, b in zip(offsets, ends, ends[1:], strict=False)
        ], None
    values, columns, presence, starts = _layout(buf, pos, header)
    if stop < count:
        count = stop  # the records after the limit are not decoded at all
        values = values[: count + 1]
    v0 = starts[0]
    records = [
        Record(buf[v0 + a : v0 + b], None, None, topic, partition, offset, ts)
        for offset, a, b in zip(offsets, values[skip:-1], values[skip + 1 :], strict=True)
    ]
    if flags & FLAG_KEYS:
        keys, k0 = columns[FLAG_KEYS], starts[FLAG_KEYS]
        for i, record in enumerate(records, skip):
            if presence[i]:
                record.key = buf[k0 + keys[i] : k0 + keys[i + 1]]
    if flags & FLAG_HEADERS:
        headers, h0 = columns[FLAG_HEADERS], starts[FLAG_HEADERS]
        for i, record in enumerate(records, skip):
            if headers[i + 1] > headers[i]:
                try:
                    record.headers = _decode_headers(buf[h0 + headers[i] : h0 + headers[i + 1]])
                except msgspec.DecodeError as exc:
                    raise CorruptData(f"batch headers do not decode: {exc}") from None
    idempotency: list[bytes | None] | None = None
    if want_idempotency:
        idempotency = [None] * len(records)
        if flags & FLAG_IDEMPOTENCY:
            idem, i0 = columns[FLAG_IDEMPOTENCY], starts[FLAG_IDEMPOTENCY]
            for j, i in enumerate(range(skip, count)):
                if idem[i + 1] > idem[i]:
                    idempotency[j] = buf[i0 + idem[i] : i0 + idem[i + 1]]
    return records, idempotency


def decode_keys(
    buf: bytes, pos: int, header: BatchHeader, start_offset: int = 0
) -> tuple[range, list[bytes | None] | None]:
    """The offsets (>= start_offset) and keys of a verified batch's records, without
    decoding their values; keys is None when no record in it has one."""
    count = header.record_count
    skip = max(0, start_offset - header.base_offset)
    offsets = range(header.base_offset + skip, header.base_offset + count)
    if not header.flags & FLAG_KEYS:
        return offsets, None
    _, columns, presence, starts = _layout(buf, pos, header)
    keys, k0 = columns[FLAG_KEYS], starts[FLAG_KEYS]
    return offsets, [
        buf[k0 + keys[i] : k0 + keys[i + 1]] if presence[i] else None for i in range(skip, count)
    ]


def decode_headers(
    buf: bytes, pos: int, header: BatchHeader, start_offset: int = 0, containing: bytes = b""
) -> list[tuple[int, dict[str, bytes]]]:
    """(offset, headers) of a verified batch's records (offset >= start_offset) that
    have headers, values left undecoded; none at all when no header in the batch
    holds the bytes `containing` (a cheap test before decoding any)."""
    if not header.flags & FLAG_HEADERS:
        return []
    _, columns, _, starts = _layout(buf, pos, header)
    ends, h0 = columns[FLAG_HEADERS], starts[FLAG_HEADERS]
    if containing and buf.find(containing, h0, h0 + ends[-1]) < 0:
        return []
    skip = max(0, start_offset - header.base_offset)
    out = []
    for i in range(skip, header.record_count):
        if ends[i + 1] > ends[i]:
            try:
                found = _decode_headers(buf[h0 + ends[i] : h0 + ends[i + 1]])
            except msgspec.DecodeError as exc:
                raise CorruptData(f"batch headers do not decode: {exc}") from None
            out.append((header.base_offset + i, found))
    return out
