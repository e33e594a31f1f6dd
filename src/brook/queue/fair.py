"""Which ready record to lease next: round-robin across keys. Pure: no I/O, no clock.

Each key has a lane of ready records in offset order. Lanes take turns, one
record per turn, so a key with a million records waiting gets one lease in
every turn of the others, never all of them: no key starves another. With
ordering by key, a lane is held while one of its records is out (leased or
waiting to retry), and that record goes back to the front of its lane, so a
key's records are leased one at a time in offset order while other keys flow.
Records without a key share one lane, which is never held: they have no order to keep.

Where order is not kept, a record ready for another attempt goes to a retry lane
of its key, which takes turns like any other: after an outage, a backlog of a
hundred thousand retries gets every other turn, and records new since get the
others, rather than waiting behind the whole backlog.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator
from typing import Generic, NamedTuple, TypeVar

Item = TypeVar("Item")


class Again(NamedTuple):
    """The lane of a key's records that are ready for another attempt."""

    key: Hashable


class FairQueue(Generic[Item]):
    def __init__(self, ordered: bool = False) -> None:
        self.ordered = ordered
        self._lanes: dict[Hashable, deque[Item]] = {}
        self._turns: OrderedDict[Hashable, None] = OrderedDict()
        """Keys whose lane has a record and is not held, in the order they get turns."""
        self._held: set[Hashable] = set()
        self._count = 0

    def __len__(self) -> int:
        """Records waiting, held lanes included."""
        return self._count

    def available(self) -> bool:
        """Whether `pop` would hand out a record."""
        return bool(self._turns)

    def add(self, key: Hashable, item: Item) -> None:
        """A record became ready: to the back of its key's lane."""
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = deque()
        lane.append(item)
        self._count += 1
        if key not in self._turns and key not in self._held:
            self._turns[key] = None

    def add_many(self, key: Hashable, items: list[Item]) -> None:
        """Records of one key became ready, in order: to the back of its lane."""
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = deque()
        lane.extend(items)
        self._count += len(items)
        if key not in self._turns and key not in self._held:
            self._turns[key] = None

    def add_again(self, key: Hashable, item: Item) -> None:
        """A record ready for another attempt, where order is not kept: to the back
        of its key's retry lane."""
        self.add(Again(key), item)

    def put_back(self, key: Hashable, item: Item) -> None:
        """A record that was out is ready again: to the front of its lane if ordered
        (it comes before later records of its key), else to its key's retry lane."""
        if not self.ordered or key is None:
            self.add_again(key, item)
            return
        self._lanes.setdefault(key, deque()).appendleft(item)
        self._count += 1
        self._held.discard(key)
        self._turns[key] = None

    def pop(self) -> tuple[Hashable, Item] | None:
        """The next record and its key by turns, or None when every lane is empty or held.
        With ordering, its lane is held until `release` or `put_back`."""
        turns = self._turns
        if not turns:
            return None
        if len(turns) == 1 and not self.ordered:
            # One key has turns (often: no keys at all): it simply goes on.
            key = next(iter(turns))
            lane = self._lanes[key]
            item = lane.popleft()
            self._count -= 1
            if not lane:
                del self._lanes[key]
                del turns[key]
            return (key.key if type(key) is Again else key), item
        key, _ = turns.popitem(last=False)
        lane = self._lanes[key]
        item = lane.popleft()
        self._count -= 1
        record_key = key.key if type(key) is Again else key
        if self.ordered and record_key is not None:
            self._held.add(key)
        elif lane:
            self._turns[key] = None  # its next turn comes after every other key's
        if not lane:
            del self._lanes[key]
        return record_key, item

    def fronts(self) -> Iterator[Item]:
        """The first two records of every lane, held ones included. Lanes are in the order
        their records became ready, but for a record put back at the front of an ordered
        lane: the longest-waiting record of every lane is among these."""
        for lane in self._lanes.values():
            yield from itertools.islice(lane, 2)

    def release(self, key: Hashable) -> None:
        """The key's record that was out is finished (acked or dead): its lane flows again."""
        self._held.discard(key)
        if key in self._lanes:
            self._turns[key] = None

    def holding(self, key: Hashable) -> None:
        """Hold a key's lane (a record of it is out, learned while rebuilding state)."""
        if self.ordered and key is not None:
            self._held.add(key)
            self._turns.pop(key, None)
