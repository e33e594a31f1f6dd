"""Reading a partition's segments: the one walk over stored batches, and what is
decoded from them (records, keys, idempotency keys).

Every function here takes the list of segments a reader took from its partition
(the partition replaces its list, never changes it) and the durable end, and
verifies every batch's CRC32C before any byte of it is used.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from itertools import repeat

from brook import scheduling
from brook.codec import decode_keys, decode_records, parse_header, scan_batches
from brook.codec.batch import FLAG_IDEMPOTENCY, decode_headers, verify
from brook.errors import CorruptData
from brook.log.segment import Segment
from brook.records import Record
from brook.scheduling import Schedule

log = logging.getLogger("brook.log")


def _base_offset(segment: Segment) -> int:
    return segment.base_offset


def batches(
    segments: list[Segment], end: int, offset: int, limit: int, bytes_max: int
) -> tuple[bytes, int]:
    """Whole batches holding records from `offset` below `end` (about `limit` of them,
    about `bytes_max` bytes, at least one batch), verified; and the offset to read next.

    The first batch may start before `offset` and the last reach past the limit:
    callers decode from `offset` and cut at their limit. Raises CorruptData."""
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
        pos, first, last = 0, 0, offset
        while pos < len(buf):
            header = parse_header(buf, pos)
            if isinstance(header, str) or not verify(buf, pos, header):
                problem = header if isinstance(header, str) else "checksum mismatch"
                raise CorruptData(f"{segment.name} at byte {start + pos}: {problem}")
            if header.base_offset >= end:
                break
            pos += header.length
            if header.next_offset <= offset:
                first = pos  # before the offset: the sparse index starts a little early
            last = header.next_offset
        if last > offset:
            return buf[first:pos], min(last, end)
        if index + 1 >= len(segments):
            break
        offset = max(offset, segment.next_offset)  # a gap left by compaction at the segment's end
    return b"", offset


def records(
    segments: list[Segment],
    end: int,
    topic: str,
    partition: int,
    offset: int,
    limit: int,
    bytes_max: int,
) -> list[Record]:
    """Durable records at offsets >= `offset`, in order, at most `limit`."""
    offset = max(offset, segments[0].base_offset)
    out: list[Record] = []
    while len(out) < limit:
        raw, next_offset = batches(segments, end, offset, limit - len(out), bytes_max)
        pos = 0
        while pos < len(raw) and len(out) < limit:
            header = parse_header(raw, pos)
            assert not isinstance(header, str), "batches() returns whole, verified batches"
            got, _ = decode_records(
                raw, pos, header, topic, partition, offset, limit=limit - len(out)
            )
            out.extend(got)
            pos += header.length
        if next_offset <= offset:
            break
        offset = next_offset
    return out


def keys(
    raw: bytes, offset: int, schedules: dict[int, Schedule] | None = None
) -> list[tuple[int, bytes | None, int]]:
    """(offset, key, timestamp) of the records from `offset` in verified batches
    `raw`, values left undecoded. With `schedules`, the priority and not-before time
    of those that have either (their `brook.` headers, scheduling.py) go in it by offset."""
    out: list[tuple[int, bytes | None, int]] = []
    pos = 0
    while pos < len(raw):
        header = parse_header(raw, pos)
        assert not isinstance(header, str), "batches() returns whole, verified batches"
        offsets, found = decode_keys(raw, pos, header, offset)
        ts = header.timestamp
        if found is None:
            out.extend((o, None, ts) for o in offsets)
        else:
            out.extend(zip(offsets, found, repeat(ts)))
        if schedules is not None:
            for o, headers in decode_headers(raw, pos, header, offset, b"brook."):
                schedule = scheduling.of(headers, ts)
                if schedule is not None:
                    schedules[o] = schedule
        pos += header.length
    return out


def idempotency_keys(
    segments: list[Segment],
    topic: str,
    partition: int,
    since_ms: int | None = None,
    from_offset: int | None = None,
) -> list[tuple[bytes, int, int]]:
    """(idempotency key, offset, timestamp) of durable records newer than `since_ms`
    or, with `from_offset`, in batches holding offsets from it on.

    Reads only batches inside the window (timestamps never decrease within a
    partition). A corrupt batch is reported and skipped, never fatal: its keys
    are forgotten, so a retry of one of them could be appended again.
    """
    found: list[tuple[bytes, int, int]] = []
    for segment in segments:
        if from_offset is not None:
            first = max(0, bisect_right(segment.bases, from_offset) - 1)
            if segment.next_offset <= from_offset:
                continue
        else:
            assert since_ms is not None
            if segment.max_timestamp < since_ms:
                continue  # all of it older than the window: nothing to read
            first = max(0, bisect_left(segment.timestamps, since_ms) - 1)  # sparse index
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
            if (from_offset is not None and header.next_offset <= from_offset) or (
                since_ms is not None and header.timestamp < since_ms
            ):
                continue  # before the window: the sparse index starts a little early
            got, idempotency = decode_records(
                buf, pos, header, topic, partition, want_idempotency=True
            )
            for record, key in zip(got, idempotency or (), strict=True):
                if key is not None:
                    found.append((key, record.offset, record.timestamp))
    return found


def decoded_batches(
    segment: Segment, topic: str, partition: int
) -> Iterator[tuple[int, list[Record], list[bytes | None]]]:
    """(timestamp, records, idempotency keys) of each durable batch of one segment, in
    order; the segment is read whole (at most segment_bytes_max). Raises CorruptData."""
    if not len(segment.positions):
        return
    start = segment.positions[0]
    buf = segment.read(start, segment.durable_bytes)
    for item in scan_batches(buf, 0, None):
        if isinstance(item, str):
            raise CorruptData(f"{segment.name}: {item}")
        pos, header = item
        got, idempotency = decode_records(buf, pos, header, topic, partition, want_idempotency=True)
        yield header.timestamp, got, idempotency or [None] * len(got)


def keys_of(segment: Segment) -> Iterator[tuple[int, bytes]]:
    """(offset, key) of every keyed durable record of one segment, in order, values
    left undecoded. Raises CorruptData."""
    if not len(segment.positions):
        return
    start = segment.positions[0]
    buf = segment.read(start, segment.durable_bytes)
    for item in scan_batches(buf, 0, None):
        if isinstance(item, str):
            raise CorruptData(f"{segment.name}: {item}")
        pos, header = item
        offsets, found = decode_keys(buf, pos, header, header.base_offset)
        if found is not None:
            for offset, key in zip(offsets, found, strict=True):
                if key is not None:
                    yield offset, key
