"""A replay: acked records of a queue group sent again, from an offset on. Pure.

A group forgets the records it has acked (below its floor, or in acked runs), so
"send again everything from offset 1,000" cannot mark them one by one: there may
be millions. A replay is a cursor per partition instead, from `next` to `stop`
(the end of what the group had taken in when it was asked), which brings the
acked records back a window at a time (QueueGroup._offer_again), each as a new
life from the replay's time (lifecycle.replayed).

The records in the range that were not acked when the replay was asked (ready,
leased, retrying, dead) are `skip`: they go anyway, or wait for a redrive, and a
replay never sends them twice, even if they are acked before the cursor reaches
them. The cursor is written in the group's snapshots (status.Snapshot.replaying);
a restart takes as brought back every record from `next` up to the last one with
a change in the log after the snapshot (the others it brought back were untouched,
and it brings them back again).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple


class Replay(NamedTuple):
    next: int
    """The next offset the cursor looks at."""
    stop: int
    """The offset it stops before."""
    at_ms: int
    """When it was asked (the latest ask, when several were merged)."""
    skip: frozenset[int]
    """Offsets from `next` to `stop` it leaves alone: not acked when it was asked."""

    def covers(self, offset: int) -> bool:
        """Whether the cursor will still bring back the record at `offset`."""
        return self.next <= offset < self.stop and offset not in self.skip

    def waiting(self, start_offset: int) -> int:
        """How many records it will still bring back (those retention left)."""
        first = max(self.next, start_offset)
        return max(0, self.stop - first - sum(1 for o in self.skip if o >= first))

    def advanced(self, to: int) -> Replay | None:
        """The cursor moved on to `to`; None once it is done."""
        if to >= self.stop:
            return None
        return Replay(to, self.stop, self.at_ms, frozenset(o for o in self.skip if o >= to))

    def row(self, partition: int) -> tuple[int, int, int, int, list[int]]:
        """As a snapshot holds it."""
        return (partition, self.next, self.stop, self.at_ms, sorted(self.skip))


def ask(
    under_way: list[Replay], first: int, stop: int, at_ms: int, kept: Iterable[int]
) -> tuple[list[Replay], int]:
    """A replay of one partition from `first` to `stop`, asked at `at_ms` while the
    group keeps the records at `kept` (not acked), with the replays `under_way`
    there (apart, in offset order): the replays from then on, and how many acked
    records the ask itself brings back. `stop` is never below an earlier ask's:
    the ask joins every replay that reaches `first` (so none covers a record twice)."""
    kept = set(kept)
    count = stop - first - sum(1 for o in kept if first <= o < stop)
    for r in under_way:  # what a replay under way will bring back anyway
        both, end = max(first, r.next), min(stop, r.stop)
        if both < end:
            count -= end - both - sum(1 for o in r.skip if both <= o < end)
    apart = [r for r in under_way if r.stop < first]
    joined = [r for r in under_way if r.stop >= first]
    low = min([first] + [r.next for r in joined])
    skip = {o for o in kept if first <= o < stop}
    # Below `first`, only a joined replay reaches: what it left alone stays so.
    for r in joined:
        skip |= {o for o in r.skip if o < first}
    return [
        *apart,
        Replay(low, max([stop] + [r.stop for r in joined]), at_ms, frozenset(skip)),
    ], count


def from_row(row: tuple[int, int, int, int, list[int]]) -> tuple[int, Replay]:
    partition, next_offset, stop, at_ms, skip = row
    return partition, Replay(next_offset, stop, at_ms, frozenset(skip))
