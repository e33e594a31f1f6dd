"""A compact map from timer id to one int and a 32-bit check: pending timers'
ids without a Python object per timer.

A million pending timers as a dict of str to int cost about 150 bytes each in
objects, and leave the allocator fragmented after a burst of scheduling. Here
an id is kept as its 128-bit BLAKE2b digest in two arrays of 64-bit words, with
its value in a third and its check (a checksum of the timer's record, to tell a
second schedule of the id with another record) in a fourth: open addressing with
linear probing, at most half full, about 60 bytes a timer. Two ids share a
digest with odds of about 2^-128 per pair: for all purposes never.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from hashlib import blake2b

_EMPTY = 0
_GONE = 1
"""Markers in the `high` word; a digest whose high word is 0 or 1 is nudged to 2."""
_MIN_SLOTS = 1024
_LOW_MASK = (1 << 64) - 1


def _digest(timer_id: str) -> tuple[int, int]:
    whole = int.from_bytes(blake2b(timer_id.encode(), digest_size=16).digest(), "little")
    high = whole >> 64
    return (high if high > _GONE else 2), whole & _LOW_MASK


class IdIndex:
    def __init__(self) -> None:
        self._reset(_MIN_SLOTS)

    def _reset(self, slots: int) -> None:
        self._high = array("Q", bytes(8 * slots))
        self._low = array("Q", bytes(8 * slots))
        self._values = array("Q", bytes(8 * slots))
        self._checks = array("I", bytes(4 * slots))
        self._mask = slots - 1
        self._count = 0
        self._used = 0
        """Slots not empty: live ones and tombstones."""

    def __len__(self) -> int:
        return self._count

    def __contains__(self, timer_id: str) -> bool:
        return self._find(*_digest(timer_id)) >= 0

    def get(self, timer_id: str) -> int | None:
        slot = self._find(*_digest(timer_id))
        return None if slot < 0 else self._values[slot]

    def entry(self, timer_id: str) -> tuple[int, int] | None:
        """(value, check) of `timer_id`, or None."""
        slot = self._find(*_digest(timer_id))
        return None if slot < 0 else (self._values[slot], self._checks[slot])

    def _find(self, high: int, low: int) -> int:
        """The slot holding the digest, or -1."""
        highs, mask = self._high, self._mask
        slot = low & mask
        while True:
            found = highs[slot]
            if found == _EMPTY:
                return -1
            if found == high and self._low[slot] == low:
                return slot
            slot = (slot + 1) & mask

    def __setitem__(self, timer_id: str, value: int) -> None:
        high, low = _digest(timer_id)
        slot = self._find(high, low)
        if slot >= 0:
            self._values[slot] = value
            return
        if 2 * (self._used + 1) > len(self._high):
            self._grow()
        self._put(high, low, value, 0)

    def add(self, timer_id: str, value: int, check: int = 0) -> bool:
        """Map `timer_id` to `value` unless it is there already; whether it was added.
        (One digest and one probe, for the common case of scheduling.)"""
        high, low = _digest(timer_id)
        highs, lows, mask = self._high, self._low, self._mask
        slot = low & mask
        while True:
            found = highs[slot]
            if found == _EMPTY:
                break
            if found == high and lows[slot] == low:
                return False
            slot = (slot + 1) & mask
        if 2 * (self._used + 1) > len(highs):
            self._grow()
        self._put(high, low, value, check)
        return True

    def _put(self, high: int, low: int, value: int, check: int) -> None:
        highs, mask = self._high, self._mask
        slot = low & mask
        while highs[slot] > _GONE:
            slot = (slot + 1) & mask
        if highs[slot] == _EMPTY:
            self._used += 1
        highs[slot] = high
        self._low[slot] = low
        self._values[slot] = value
        self._checks[slot] = check
        self._count += 1

    def pop(self, timer_id: str, default: int | None = None) -> int | None:
        slot = self._find(*_digest(timer_id))
        if slot < 0:
            return default
        self._high[slot] = _GONE
        self._count -= 1
        return self._values[slot]

    def values(self) -> Iterator[int]:
        for high, value in zip(self._high, self._values, strict=True):
            if high > _GONE:
                yield value

    def _grow(self) -> None:
        """Rehash into a table sized for twice the live entries (tombstones dropped)."""
        live = [
            entry
            for entry in zip(self._high, self._low, self._values, self._checks, strict=True)
            if entry[0] > _GONE
        ]
        slots = _MIN_SLOTS
        while slots < 4 * max(len(live), 1):
            slots *= 2
        self._reset(slots)
        for high, low, value, check in live:
            self._put(high, low, value, check)
