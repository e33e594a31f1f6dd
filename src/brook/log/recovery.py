"""Recovery scans: pure functions from a segment's bytes to what in it is valid.

The broker calls these on open for the active segment (and for any segment
whose seal is missing). A scan keeps every whole, checksummed batch in offset
order up to the first one that is not, and says why it stopped there.
"""

from __future__ import annotations

from typing import NamedTuple

from brook.codec import SEGMENT_HEADER_BYTES, IndexEntry, scan_batches


class ScanResult(NamedTuple):
    entries: list[IndexEntry]
    """One entry per valid batch, in order."""
    valid_bytes: int
    """Length of the valid prefix of the segment: keep this, drop the rest."""
    next_offset: int
    """The offset after the last valid record."""
    problem: str | None
    """Why the scan stopped before the end of the bytes, or None if it did not."""


def scan_segment(buf: bytes, base_offset: int) -> ScanResult:
    """Find the valid prefix of a segment's bytes (header included in `buf`)."""
    entries: list[IndexEntry] = []
    valid = SEGMENT_HEADER_BYTES
    next_offset = base_offset
    problem = None
    for item in scan_batches(buf, SEGMENT_HEADER_BYTES, base_offset):
        if isinstance(item, str):
            problem = item
            break
        position, header = item
        entries.append(IndexEntry(header.base_offset, position, header.timestamp))
        valid = position + header.length
        next_offset = header.next_offset
    return ScanResult(entries, valid, next_offset, problem)
