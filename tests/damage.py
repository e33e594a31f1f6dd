"""Damage on disk, for tests that check it is reported and never served."""

from __future__ import annotations

from pathlib import Path


def flip_byte_of(segment: Path, inside: bytes) -> None:
    """Flip every bit of the first byte of `inside` where it first appears in `segment`
    (a record's value, say), as a bad sector or a stray write would."""
    raw = bytearray(segment.read_bytes())
    raw[raw.index(inside)] ^= 0xFF
    segment.write_bytes(bytes(raw))
