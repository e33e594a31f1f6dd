"""A compact map from an id (a timer's, or a topic's idempotency key) to one int
and a 32-bit check, without a Python object per id.

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


Digest = tuple[int, int]
"""An id's digest as the index keeps it: (high word, low word)."""


def digest(name: str | bytes) -> Digest:
    data = name.encode() if isinstance(name, str) else name
    whole = int.from_bytes(blake2b(data, digest_size=16).digest(), "little")
    high = whole >> 64
    return (high if high > _GONE else 2), whole & _LOW_MASK


class IdIndex:
    def __init__(self) -> None:
        self._reset(_MIN_SLOTS)

    def _reset(self, slots: int) -> None:
        self._high = array("Q", [0]) * slots
        self._low = array("Q", [0]) * slots
        self._values = array("Q", [0]) * slots
        self._checks = array("I", [0]) * slots
        self._mask = slots - 1
        self._count = 0
        self._used = 0
        """Slots not empty: live ones and tombstones."""

    def __len__(self) -> int:
        return self._count

    def __contains__(self, name: str | bytes) -> bool:
        return self._find(*digest(name)) >= 0

    def get(self, name: str | bytes) -> int | None:
        slot = self._find(*digest(name))
        return None if slot < 0 else self._values[slot]

    def entry(self, name: str | bytes) -> tuple[int, int] | None:
        """(value, check) of `name`, or None."""
        slot = self._find(*digest(name))
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

    def __setitem__(self, name: str | bytes, value: int) -> None:
        self.assign(digest(name), value)

    def add(self, name: str | bytes, value: int, check: int = 0) -> bool:
        """Map `name` to `value` unless it is there already; whether it was added.
        (One digest and one probe, for the common case of scheduling.)"""
        high, low = digest(name)
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

    def assign(self, key: Digest, value: int) -> None:
        """Map the id whose digest is `key` to `value` (for callers that keep digests)."""
        high, low = key
        slot = self._find(high, low)
        if slot >= 0:
            self._values[slot] = value
            return
        if 2 * (self._used + 1) > len(self._high):
            self._grow()
        self._put(high, low, value, 0)

    def discard(self, key: Digest, value: int) -> None:
        """Remove the id whose digest is `key` if it still maps to `value`."""
        slot = self._find(*key)
        if slot >= 0 and self._values[slot] == value:
            self._high[slot] = _GONE
            self._count -= 1

    def pop(self, name: str | bytes, default: int | None = None) -> int | None:
        slot = self._find(*digest(name))
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
        """Rehash into a table of at least four slots a live entry (tombstones dropped),
        straight from the old arrays: a list of the live entries first was about 200
        bytes an entry at the peak (a million idempotency keys: 200 MB)."""
        slots = _MIN_SLOTS
        while slots < 4 * max(self._count, 1):
            slots *= 2
        highs, lows, values, checks = self._high, self._low, self._values, self._checks
        self._reset(slots)
        put = self._put
        for high, low, value, check in zip(highs, lows, values, checks, strict=True):
            if high > _GONE:
                put(high, low, value, check)


class RowLog:
    """Rows kept in the order they were added, each found by its id through an IdIndex,
    and forgotten oldest first: the shape of a bounded history (fired timers, recent
    idempotency keys) in arrays, a few dozen bytes a row and no Python object per row.

    `columns` names each column's array type code; `column(name)[i]` reads row i as
    `find` gives it (valid until the next `forget_oldest` or `forget_where`). A newer
    row for an id replaces the older one, which stays in the arrays, dead, until
    forgotten."""

    COMPACT_ROWS = 4096
    """Forgotten rows are cut from the arrays' front once this many and half of them."""

    def __init__(self, **columns: str) -> None:
        self._index = IdIndex()
        """Id digest -> the number of its newest row."""
        self._base = 0
        """The number of the arrays' first row (rows are numbered from the first ever)."""
        self._start = 0
        """Index of the first row not yet forgotten."""
        self._high = array("Q")
        self._low = array("Q")
        """Each row's id digest, to forget it without its text."""
        self._columns = {name: array(code) for name, code in columns.items()}

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, name: str | bytes) -> bool:
        return name in self._index

    def column(self, name: str) -> array[int]:
        return self._columns[name]

    def add(self, name: str | bytes, *values: int) -> None:
        """Append a row for `name` (values in the columns' order) as the newest."""
        key = digest(name)
        row = self._base + len(self._high)
        self._high.append(key[0])
        self._low.append(key[1])
        for column, value in zip(self._columns.values(), values, strict=True):
            column.append(value)
        self._index.assign(key, row)

    def find(self, name: str | bytes) -> int | None:
        """The index of `name`'s row in the columns, or None."""
        row = self._index.get(name)
        return None if row is None else row - self._base

    def forget_oldest(self, stamps: str, horizon: int, most: int) -> None:
        """Forget rows from the oldest on while they are stamped (column `stamps`) before
        `horizon` or more than `most` are live."""
        start, end = self._start, len(self._high)
        stamped = self._columns[stamps]
        while start < end and (len(self._index) > most or stamped[start] < horizon):
            self._index.discard((self._high[start], self._low[start]), self._base + start)
            start += 1
        self._start = start
        self._compact()

    def forget_where(self, column: str, value: int) -> None:
        """Forget every live row whose `column` holds `value`."""
        values = self._columns[column]
        for i in range(self._start, len(self._high)):
            if values[i] == value:
                self._index.discard((self._high[i], self._low[i]), self._base + i)

    def _compact(self) -> None:
        start = self._start
        if start >= self.COMPACT_ROWS and 2 * start >= len(self._high):
            for column in (self._high, self._low, *self._columns.values()):
                del column[:start]
            self._base += start
            self._start = 0


class Numbers:
    """Names (topics) numbered from 0 in the order first seen, so rows and packed words
    keep a small int instead of the text. Names are never forgotten: there are few."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}
        self._names: list[str] = []

    def number(self, name: str) -> int:
        number = self._numbers.get(name)
        if number is None:
            number = self._numbers[name] = len(self._names)
            self._names.append(name)
        return number

    def known(self, name: str) -> int | None:
        """The number of `name` if it was ever numbered."""
        return self._numbers.get(name)

    def name(self, number: int) -> str:
        return self._names[number]
