"""Sets of offsets kept as sorted, disjoint half-open ranges: [start, stop).

Retention asks queue groups which offsets of a segment they still need; that is
often "everything from here on" (records not yet handed out), which a set would
hold one integer per record. Ranges hold it in one pair. Pure.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator


class Ranges:
    __slots__ = ("_starts", "_stops")

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        """From any (start, stop) pairs: empty ones dropped, overlapping or touching
        ones merged."""
        merged: list[list[int]] = []
        for start, stop in sorted(r for r in ranges if r[0] < r[1]):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], stop)
            else:
                merged.append([start, stop])
        self._starts = [start for start, _ in merged]
        self._stops = [stop for _, stop in merged]

    @classmethod
    def of(cls, offsets: Iterable[int]) -> Ranges:
        """The ranges holding exactly `offsets` (any order, repeats allowed)."""
        runs: list[tuple[int, int]] = []
        for offset in sorted(set(offsets)):
            if runs and runs[-1][1] == offset:
                runs[-1] = (runs[-1][0], offset + 1)
            else:
                runs.append((offset, offset + 1))
        return cls(runs)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(zip(self._starts, self._stops, strict=True))

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int):
            return False
        i = bisect_right(self._starts, offset) - 1
        return i >= 0 and offset < self._stops[i]

    def __bool__(self) -> bool:
        return bool(self._starts)

    def __len__(self) -> int:
        """How many offsets."""
        return sum(stop - start for start, stop in self)

    def __or__(self, other: Ranges) -> Ranges:
        return Ranges([*self, *other])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ranges) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Ranges({list(self)})"
