"""Which ready record to lease next: by priority, then round-robin across keys,
within each key's limits. Pure: no I/O; the time is passed in (`advance`).

Each key has a lane of ready records in offset order. Lanes take turns, one
record per turn, so a key with a million records waiting gets one lease in
every turn of the others, never all of them: no key starves another. Records
without a key share one lane: they have no order to keep and no limits.

Priorities: each priority has its own turns, and the highest priority with a
record ready goes first. So that a flood of high-priority work cannot starve the
rest for ever, `lower_share` of the leases (default 0.1: one in ten) go to the
lower priorities while they have records waiting, taking turns among them: a
priority below the top one gets at least `lower_share / (priorities waiting - 1)`
of the leases. With `lower_share=0` priority is strict.

Limits per key (records without a key have none): with ordering by key, one of
a key's records is out (leased, or waiting to retry) at a time, and it goes back
to the front of its lane, so a key's records are leased one at a time in offset
order while other keys flow. `per_key` limits how many of a key's records are
leased at once, in any order; `key_rate_per_s` how many a second a key gets (a
bucket of one second's worth, at least one); `rate_per_s` the same for the
whole group. A key at its limit has its lanes held until a record comes back or
its bucket refills.

A not-before time delays a record: held out of its lane until then; with
ordering by key it stays in its lane and holds the key's later records back too
(their order is kept).

Where order is not kept, a record ready for another attempt goes to a retry lane
of its key, which takes turns like any other: after an outage, a backlog of a
hundred thousand retries gets every other turn, and records new since get the
others, rather than waiting behind the whole backlog.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator
from typing import Generic, NamedTuple, TypeVar, cast

Item = TypeVar("Item", bound=Hashable)


class Again(NamedTuple):
    """The lane of a key's records that are ready for another attempt."""

    key: Hashable


Lane = tuple[int | None, Hashable]
"""(priority, key or Again(key)); an ordered key's one lane has priority None: it
takes its turns at the priority of its front record."""

_KEY, _LANE, _ITEM, _DUE, _RATE = range(5)
"""What a wake-up is for: a key's bucket refilled; an ordered lane's front record
due; a delayed record due (into its lane); a delayed record in an ordered lane due
(it is no longer counted delayed); the group's bucket refilled."""


def _record_key(lane: Lane) -> Hashable:
    key = lane[1]
    return key.key if type(key) is Again else key


class FairQueue(Generic[Item]):
    def __init__(
        self,
        ordered: bool = False,
        per_key: int | None = None,
        key_rate_per_s: float | None = None,
        rate_per_s: float | None = None,
        lower_share: float = 0.1,
    ) -> None:
        self.ordered = ordered
        self.limit = 1 if ordered else per_key
        """How many of one key's records may be out at once (None: any number)."""
        self.key_rate = key_rate_per_s
        self.rate = rate_per_s
        self.lower_share = lower_share
        self.now_ms = 0
        """The furthest time `advance` has reached: a clock stepped back does not move it
        back (what was released stays released; the rest waits for the clock)."""
        self.clock_ms = 0
        """What the clock said at the last `advance`, back steps included: a not-before
        time is due only once the clock says so again (never early after a step back)."""
        self._lanes: dict[Lane, deque[Item]] = {}
        self._turns: dict[int, OrderedDict[Lane, None]] = {}
        """Per priority, the lanes with a record ready and not held, in turn order."""
        self._levels: list[int] = []
        """The priorities that have turns, highest first."""
        self._where: dict[Lane, int] = {}
        """The priority whose turns hold each lane that has turns."""
        self._priority: dict[Item, int] = {}
        """The priority of each record waiting here that has one other than 0."""
        self._count = 0
        self.delayed = 0
        """Records waiting for their not-before time."""
        self._due: dict[Item, int] = {}
        self._limited = self.limit is not None or key_rate_per_s is not None
        self._key_lanes: dict[Hashable, set[Lane]] = {}
        """Per key with limits, its lanes that have records (held or not)."""
        self._out: dict[Hashable, int] = {}
        self._full: set[Hashable] = set()
        """Keys at their limit of records out."""
        self._until: dict[Hashable, int] = {}
        """Keys whose bucket is empty, and when it has a record's worth again."""
        self._buckets: dict[Hashable, tuple[float, int]] = {}
        """Per key, (tokens, when counted); a key not here has a full bucket."""
        self._tokens = self._burst(rate_per_s)
        self._tokens_at = 0
        self._wakes: list[tuple[int, int, int, object]] = []
        self._serial = itertools.count()
        self._credit = 0.0
        self._lower_turn = 0

    @staticmethod
    def _burst(rate: float | None) -> float:
        return max(1.0, rate) if rate is not None else math.inf

    def __len__(self) -> int:
        """Records waiting, held and delayed ones included."""
        return self._count

    def available(self) -> bool:
        """Whether `pop` would hand out a record now."""
        if not self._levels:
            return False
        return self.rate is None or self._group_tokens() >= 1

    # ------------------------------------------------------------ records in

    def add(
        self, key: Hashable, item: Item, priority: int = 0, not_before: int | None = None
    ) -> None:
        """A record became ready (new, or redriven): to the back of its key's lane,
        or when `not_before` is later than now, there once it is due."""
        self._count += 1
        if priority:
            self._priority[item] = priority
        if not_before is not None and not_before > self.clock_ms:
            self.delayed += 1
            self._due[item] = not_before
            if not (self.ordered and key is not None):
                self._wake(not_before, _ITEM, (key, item))
                return
            self._wake(not_before, _DUE, item)
        self._append(self._lane_of(key, priority), item)

    def add_many(self, key: Hashable, items: list[Item]) -> None:
        """Records of one key, of priority 0 and due now, became ready in order."""
        lane = self._lane_of(key, 0)
        known = self._lanes.get(lane)
        if known is None:
            self._lanes[lane] = deque(items)
        else:
            known.extend(items)
        self._count += len(items)
        self._arrived(lane)

    def add_again(self, key: Hashable, item: Item, priority: int = 0) -> None:
        """A record ready for another attempt, where order is not kept: to the back
        of its key's retry lane."""
        self._count += 1
        if priority:
            self._priority[item] = priority
        self._append((priority, Again(key)), item)

    def put_back(self, key: Hashable, item: Item, priority: int = 0) -> None:
        """A record that was out is ready again: to the front of its lane if ordered
        (it comes before later records of its key), else to its key's retry lane."""
        if not self.ordered or key is None:
            self.add_again(key, item, priority)
            self.release(key)
            return
        self._count += 1
        if priority:
            self._priority[item] = priority
        lane: Lane = (None, key)
        known = self._lanes.get(lane)
        if known is None:
            self._lanes[lane] = deque([item])
        else:
            known.appendleft(item)
        self._arrived(lane)
        self.release(key)
        self._place(lane)  # its front changed

    def remove(self, key: Hashable, item: Item) -> bool:
        """A record waiting here leaves without being handed out (cancelled): out of
        its lane, or out of the delayed ones (its wake-up then finds nothing). It was
        not out, so nothing of its key is released. False when it is not here. Costs
        the length of its lane."""
        due = self._due.pop(item, None)
        if due is not None:
            self.delayed -= 1
            if not (self.ordered and key is not None):  # not in a lane yet
                self._count -= 1
                self._priority.pop(item, None)
                return True
        priority = self._priority.get(item, 0)
        lanes: tuple[Lane, ...] = (
            ((None, key),)
            if self.ordered and key is not None
            else ((priority, key), (priority, Again(key)))
        )
        for lane in lanes:
            items = self._lanes.get(lane)
            if not items or item not in items:
                continue
            front = items[0] == item
            items.remove(item)
            self._count -= 1
            self._priority.pop(item, None)
            if not items:
                del self._lanes[lane]
                if self._limited and key is not None:
                    self._lanes_gone(key, lane)
                self._unplace(lane)
            elif front and lane[0] is None:  # an ordered lane's turns follow its front
                self._unplace(lane)
                self._place(lane)
            return True
        return False

    def _lane_of(self, key: Hashable, priority: int) -> Lane:
        return (None, key) if self.ordered and key is not None else (priority, key)

    def _append(self, lane: Lane, item: Item) -> None:
        known = self._lanes.get(lane)
        if known is None:
            self._lanes[lane] = deque([item])
        else:
            known.append(item)
        self._arrived(lane)

    def _arrived(self, lane: Lane) -> None:
        """A record joined the lane: give it turns if it has none and may have them."""
        if self._limited:
            key = _record_key(lane)
            if key is not None:
                self._key_lanes.setdefault(key, set()).add(lane)
        if lane not in self._where:
            self._place(lane)

    # ------------------------------------------------------------ records out

    def pop(self) -> tuple[Hashable, Item] | None:
        """The next record and its key, or None when none may go now. The record
        counts against its key's limits until `release` or `put_back`."""
        levels = self._levels
        if not levels:
            return None
        if self.rate is not None:
            if self._group_tokens() < 1:
                return None
            self._tokens -= 1
            if self._tokens < 1:
                self._wake(self._refilled(self._tokens, self._tokens_at, self.rate), _RATE, None)
        level = levels[0]
        if len(levels) > 1 and self.lower_share > 0:
            self._credit += self.lower_share
            if self._credit >= 1 - 1e-9:  # (tenths add up to 0.999...)
                self._credit -= 1
                level = levels[1 + self._lower_turn % (len(levels) - 1)]
                self._lower_turn += 1
        else:
            self._credit = 0.0
        turns = self._turns[level]
        lane = next(iter(turns))
        lanes = self._lanes[lane]
        item = lanes.popleft()
        self._count -= 1
        if self._priority:
            self._priority.pop(item, None)
        key = _record_key(lane)
        if not lanes:
            del self._lanes[lane]
            if self._limited and key is not None:
                self._lanes_gone(key, lane)
            self._unplace(lane)
        elif lane[0] is None or len(turns) > 1:
            # Its next turn comes after every other lane's (for an ordered lane: at
            # the priority of its new front, if it is not held below).
            self._unplace(lane)
            self._place(lane)
        if self._limited and key is not None:
            self._took(key)
        return key, item

    def release(self, key: Hashable) -> None:
        """A record of the key that was out is finished, or waits to retry where
        order is not kept: it no longer counts against the key's limit."""
        if self.limit is None or key is None:
            return
        out = self._out.get(key, 0) - 1
        if out > 0:
            self._out[key] = out
        else:
            self._out.pop(key, None)
        if key in self._full and out < self.limit:
            self._full.discard(key)
            self._unhold(key)

    def holding(self, key: Hashable) -> None:
        """A record of the key is out (learned while rebuilding state)."""
        if self.limit is None or key is None:
            return
        out = self._out[key] = self._out.get(key, 0) + 1
        if out >= self.limit and key not in self._full:
            self._full.add(key)
            self._hold(key)

    def _took(self, key: Hashable) -> None:
        self.holding(key)
        rate = self.key_rate
        if rate is None:
            return
        now = self.now_ms
        tokens, at = self._buckets.get(key, (self._burst(rate), now))
        tokens = min(self._burst(rate), tokens + (now - at) * rate / 1000) - 1
        self._buckets[key] = (tokens, now)
        if tokens < 1:
            until = self._refilled(tokens, now, rate)
            if key not in self._until:
                self._hold(key)
            self._until[key] = until
            self._wake(until, _KEY, key)

    @staticmethod
    def _refilled(tokens: float, at: int, rate: float) -> int:
        """When a bucket holding `tokens` at `at` has one whole token."""
        return at + max(1, math.ceil((1 - tokens) * 1000 / rate))

    def _group_tokens(self) -> float:
        assert self.rate is not None
        now = self.now_ms
        if now > self._tokens_at:
            self._tokens = min(
                self._burst(self.rate), self._tokens + (now - self._tokens_at) * self.rate / 1000
            )
            self._tokens_at = now
        return self._tokens

    # ------------------------------------------------------------ holding lanes

    def _held(self, key: Hashable) -> bool:
        return key in self._full or key in self._until

    def _hold(self, key: Hashable) -> None:
        for lane in self._key_lanes.get(key, ()):
            self._unplace(lane)

    def _unhold(self, key: Hashable) -> None:
        if self._held(key):
            return
        for lane in list(self._key_lanes.get(key, ())):
            self._place(lane)

    def _lanes_gone(self, key: Hashable, lane: Lane) -> None:
        lanes = self._key_lanes.get(key)
        if lanes is not None:
            lanes.discard(lane)
            if not lanes:
                del self._key_lanes[key]

    def _place(self, lane: Lane) -> None:
        """Give the lane turns at its priority unless it is empty, already has them,
        its key is held, or (ordered) its front record is not due yet."""
        items = self._lanes.get(lane)
        if not items or lane in self._where:
            return
        key = _record_key(lane)
        if self._limited and key is not None and self._held(key):
            return
        priority = lane[0]
        if priority is None:
            front = items[0]
            due = self._due.get(front)
            if due is not None and due > self.clock_ms:
                self._wake(due, _LANE, lane)  # a wake-up found stale places nothing
                return
            priority = self._priority.get(front, 0)
        turns = self._turns.get(priority)
        if turns is None:
            turns = self._turns[priority] = OrderedDict()
            bisect.insort(self._levels, priority, key=lambda level: -level)
        turns[lane] = None
        self._where[lane] = priority

    def _unplace(self, lane: Lane) -> None:
        priority = self._where.pop(lane, None)
        if priority is None:
            return
        turns = self._turns[priority]
        del turns[lane]
        if not turns:
            del self._turns[priority]
            self._levels.remove(priority)

    # ------------------------------------------------------------ time

    def _wake(self, at_ms: int, kind: int, what: object) -> None:
        heapq.heappush(self._wakes, (at_ms, next(self._serial), kind, what))

    def next_wake(self) -> int | None:
        """When time alone next changes what `pop` may hand out, if ever."""
        return self._wakes[0][0] if self._wakes else None

    def advance(self, now_ms: int) -> None:
        """Time is now `now_ms`: delayed records that are due join their lanes, and
        keys whose bucket refilled flow again."""
        self.clock_ms = now_ms
        if now_ms < self.now_ms:
            return  # the wall clock stepped back: wait for it
        self.now_ms = now_ms
        wakes = self._wakes
        while wakes and wakes[0][0] <= now_ms:
            at, _, kind, what = heapq.heappop(wakes)
            if kind == _ITEM:
                key, item = cast("tuple[Hashable, Item]", what)
                if self._due.get(item) != at:
                    continue  # removed meanwhile (and perhaps back, due another time)
                self.delayed -= 1
                del self._due[item]
                self._append(self._lane_of(key, self._priority.get(item, 0)), item)
            elif kind == _DUE:
                if self._due.get(what) != at:  # type: ignore[arg-type]
                    continue  # removed meanwhile
                self.delayed -= 1
                del self._due[what]  # type: ignore[arg-type]
            elif kind == _LANE:
                self._place(what)  # type: ignore[arg-type]
            elif kind == _KEY:
                if self._until.get(what) == at:
                    del self._until[what]
                    self._unhold(what)
                if len(self._buckets) > 1024 and len(self._buckets) > 2 * len(self._key_lanes):
                    self._forget_full_buckets()

    def _forget_full_buckets(self) -> None:
        """Drop the buckets that have refilled: a key not kept has a full one."""
        rate, now = self.key_rate, self.now_ms
        assert rate is not None
        burst = self._burst(rate)
        self._buckets = {
            key: (tokens, at)
            for key, (tokens, at) in self._buckets.items()
            if tokens + (now - at) * rate / 1000 < burst
        }

    def fronts(self) -> Iterator[Item]:
        """The first two records of every lane, held ones included. Lanes are in the order
        their records became ready, but for a record put back at the front of an ordered
        lane: the longest-waiting record of every lane is among these."""
        for lane in self._lanes.values():
            yield from itertools.islice(lane, 2)
