"""Every timer of a broker, sans I/O: which are pending, which are due, which
time buckets to load from storage, what to write to them. Time is passed in.

Timers are grouped by due time into buckets `bucket_ms` wide. Only timers due
before `loaded_until_ms` (the buckets within the look-ahead) are held whole in
memory, in a heap by due time; later ones are kept only as their id and due
time (so duplicates and cancels are known) until their bucket comes within the
look-ahead and the shell loads it. Timers scheduled, cancelled or fired since
the last flush are held until the shell writes them to their buckets.
"""

from __future__ import annotations

import heapq
import zlib
from collections.abc import Iterable, Sequence

from brook.errors import Conflict
from brook.id_index import IdIndex, Numbers
from brook.models import TimerInfo
from brook.timers.history import TimerHistory
from brook.timers.model import Timer

_TOPIC_BITS = 20
"""Low bits of a packed pending entry that number its topic (a million topics; due
times up to the year 2500 fit in the 44 bits above)."""
_TOPIC_MASK = (1 << _TOPIC_BITS) - 1


def check_of(timer: Timer) -> int:
    """A checksum of the timer's record (value, key, headers): a repeat of its id with
    another record is told from a retry of the same schedule by it."""
    check = zlib.crc32(timer.value)
    if timer.key is not None:
        check = zlib.crc32(b"\x00k" + timer.key, check)
    if timer.headers:
        for name in sorted(timer.headers):
            check = zlib.crc32(b"\x00h" + name.encode() + b"\x00" + timer.headers[name], check)
    return check


def bucket_of(due_ms: int, bucket_ms: int) -> int:
    """The start of the bucket holding timers due at `due_ms`."""
    return due_ms - due_ms % bucket_ms


class Unflushed:
    """What happened to one bucket's timers since the last flush."""

    __slots__ = ("ended", "timers")

    def __init__(self) -> None:
        self.timers: list[Timer] = []
        self.ended: list[TimerInfo] = []
        """Timers of the bucket fired or cancelled."""


class TimerBook:
    def __init__(
        self, bucket_ms: int, lookahead_ms: int, history_ms: int, history_max: int, now_ms: int
    ) -> None:
        assert bucket_ms > 0 and lookahead_ms >= 0
        self.bucket_ms = bucket_ms
        self.lookahead_ms = lookahead_ms
        self.history_ms = history_ms
        self.history_max = history_max
        self.pending = IdIndex()
        """Every pending timer's id, and its due time and topic packed in one int:
        a million pending timers must fit in little memory."""
        self._per_bucket: dict[int, int] = {}
        """How many timers are pending in each bucket."""
        self._topics = Numbers()
        self.near: dict[str, Timer] = {}
        """Pending timers due before loaded_until_ms, whole."""
        self._heap: list[tuple[int, str]] = []
        """(due, id) of near timers; entries of fired or cancelled ones are skipped."""
        self.loaded_until_ms = bucket_of(now_ms, bucket_ms)
        """Buckets starting before this are in memory; the shell loads the rest in turn."""
        self.history = TimerHistory(self._topics)
        """Fired and cancelled timers, kept for history_ms (at most history_max)."""
        self.unflushed: dict[int, Unflushed] = {}
        self.unflushed_count = 0
        """Timers scheduled and ended since the last flush."""
        self.firing: set[str] = set()
        """Timers handed out by `due` and not yet fired or put back: too late to cancel."""

    # ------------------------------------------------------------ calls

    def schedule(self, timers: Sequence[Timer], given_ids: bool = True) -> list[Timer]:
        """Take new timers; returns those accepted. A timer whose id is pending or
        in the history is a repeat: the first one stands, nothing changes. A repeat
        for another topic, or (while pending) with another record, is a mistake:
        Conflict, and none of `timers` is taken. `given_ids` False says every id is
        new (made by the broker), so none needs looking for."""
        if given_ids:
            self._check_repeats(timers)
        accepted: list[Timer] = []
        history, index, loaded_until = self.history, self._index, self.loaded_until_ms
        bucket_ms, unflushed = self.bucket_ms, self.unflushed
        for timer in timers:
            if (history and timer.id in history) or not index(timer):
                continue
            due = timer.due_ms
            if due < loaded_until:
                self._hold(timer)
            part = unflushed.get(due - due % bucket_ms)
            if part is None:
                part = self._unflushed(due)
            part.timers.append(timer)
            accepted.append(timer)
        self.unflushed_count += len(accepted)
        return accepted

    def _check_repeats(self, timers: Sequence[Timer]) -> None:
        seen: dict[str, Timer] = {}
        for timer in timers:
            first = seen.setdefault(timer.id, timer)
            if first is not timer:
                if first.topic != timer.topic or check_of(first) != check_of(timer):
                    raise Conflict(f"timer {timer.id} is given twice with different records")
                continue
            remembered = self.history.get(timer.id) if self.history else None
            if remembered is not None:
                if remembered.topic != timer.topic:
                    raise Conflict(
                        f"timer {timer.id} exists already for topic {remembered.topic}, not "
                        f"{timer.topic} (it is {remembered.state}); give the new one another id"
                    )
                continue
            entry = self.pending.entry(timer.id)
            if entry is None:
                continue
            packed, check = entry
            _, topic = self._unpack(packed)
            if topic != timer.topic:
                raise Conflict(
                    f"timer {timer.id} is pending already for topic {topic}, not {timer.topic}; "
                    "give the new one another id"
                )
            if check != check_of(timer):
                raise Conflict(
                    f"timer {timer.id} is pending already with another value, key or headers; "
                    "cancel it first, or give the new one another id"
                )

    def knows(self, timer_id: str) -> bool:
        return timer_id in self.pending or timer_id in self.history

    def cancel(self, timer_id: str, now_ms: int) -> TimerInfo | None:
        """Cancel a pending timer: its new state, or None if it is not pending
        (fired, cancelled or unknown) or is being fired."""
        pending = self.pending.get(timer_id)
        if pending is None or timer_id in self.firing:
            return None
        due, topic = self._unpack(pending)
        info = TimerInfo(timer_id, "cancelled", topic, due, at_ms=now_ms)
        self.ended(info)
        return info

    def due(self, now_ms: int, limit: int) -> list[Timer]:
        """Up to `limit` timers due at `now_ms` or before, earliest first. They stay
        pending until `fired`."""
        out: list[Timer] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms and len(out) < limit:
            _, timer_id = heapq.heappop(heap)
            timer = self.near.get(timer_id)
            if timer is not None:
                out.append(timer)
                self.firing.add(timer_id)
        return out

    def put_back(self, timers: Iterable[Timer]) -> None:
        """Timers taken by `due` that could not be fired: due again."""
        for timer in timers:
            self.firing.discard(timer.id)
            if timer.id in self.near:
                heapq.heappush(self._heap, (timer.due_ms, timer.id))

    def fired(self, timer: Timer, partition: int, offset: int, now_ms: int) -> TimerInfo:
        """The timer's record is durable in its topic at (partition, offset)."""
        info = TimerInfo(timer.id, "fired", timer.topic, timer.due_ms, partition, offset, now_ms)
        self.ended(info)
        return info

    def ended(self, info: TimerInfo) -> None:
        """A pending timer fired or was cancelled (`info` says which), now or as the
        timer log tells it on start. Nothing happens if it was not pending."""
        self.firing.discard(info.timer_id)
        packed = self.pending.pop(info.timer_id)
        if packed is None:
            return
        self._count_out(packed >> _TOPIC_BITS)
        self.near.pop(info.timer_id, None)
        self._remember(info)
        self._unflushed(info.due_ms).ended.append(info)
        self.unflushed_count += 1

    def is_pending(self, timer: Timer) -> bool:
        """Whether `timer` (as a bucket file or the look-ahead holds it) is pending."""
        packed = self.pending.get(timer.id)
        return packed is not None and packed >> _TOPIC_BITS == timer.due_ms

    def unflushed_in(self, start: int) -> list[Timer]:
        """The timers scheduled into bucket `start` since the last flush."""
        part = self.unflushed.get(start)
        return list(part.timers) if part is not None else []

    def info(self, timer_id: str) -> TimerInfo | None:
        """A timer's state, if it is pending or in the history."""
        remembered = self.history.get(timer_id)
        if remembered is not None:
            return remembered
        pending = self.pending.get(timer_id)
        if pending is None:
            return None
        due, topic = self._unpack(pending)
        return TimerInfo(timer_id, "pending", topic, due)

    # ------------------------------------------------------------ time and buckets

    def buckets_to_load(self, now_ms: int) -> list[int]:
        """Starts of the buckets that came within the look-ahead, in order."""
        horizon = now_ms + self.lookahead_ms
        starts = []
        start = self.loaded_until_ms
        while start <= horizon:
            starts.append(start)
            start += self.bucket_ms
        return starts

    def load(self, start: int, timers: Iterable[Timer]) -> None:
        """Bucket `start` was read from storage: hold its timers that are still
        pending, and those scheduled into it since the last flush."""
        part = self.unflushed.get(start)
        for timer in (*timers, *(part.timers if part else ())):
            pending = self.pending.get(timer.id)
            if (
                pending is not None
                and pending >> _TOPIC_BITS == timer.due_ms
                and timer.id not in self.near
            ):
                self._hold(timer)
        self.loaded_until_ms = max(self.loaded_until_ms, start + self.bucket_ms)

    def next_due_ms(self) -> int | None:
        """When the earliest timer held is due (None if none is)."""
        heap = self._heap
        while heap and heap[0][1] not in self.near:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def forget_old(self, now_ms: int) -> None:
        """Drop history older than history_ms, and beyond history_max."""
        self.history.forget_old(now_ms - self.history_ms, self.history_max)

    def take_unflushed(self) -> dict[int, Unflushed]:
        """What to write to each bucket since the last flush; the far timers among
        it are dropped from memory (their ids stay pending)."""
        taken, self.unflushed = self.unflushed, {}
        self.unflushed_count = 0
        return taken

    def restore_unflushed(self, taken: dict[int, Unflushed]) -> None:
        """A flush failed: keep what it was to write, for the next one."""
        for start, part in taken.items():
            mine = self._unflushed(start)
            mine.timers[:0] = part.timers
            mine.ended[:0] = part.ended
            self.unflushed_count += len(part.timers) + len(part.ended)

    def pending_by_bucket(self) -> dict[int, int]:
        """How many timers are pending in each bucket (by its start), from the counts kept."""
        return {start: n for start, n in self._per_bucket.items() if n}

    def pending_in(self, start: int) -> bool:
        """Whether bucket `start` still has a pending timer."""
        return self._per_bucket.get(start, 0) > 0

    def restore(self, timers: Iterable[Timer], ended: Iterable[TimerInfo], now_ms: int) -> None:
        """A bucket as its files tell it on start: its timers that did not end are
        pending (held whole if the bucket is loaded), and recent ended ones are
        remembered. Buckets are restored oldest first."""
        gone = set()
        for info in ended:
            gone.add(info.timer_id)
            if (info.at_ms or 0) >= now_ms - self.history_ms:
                self._remember(info)
        for timer in timers:
            if timer.id in gone or not self._index(timer):
                continue
            if timer.due_ms < self.loaded_until_ms:
                self._hold(timer)

    # ------------------------------------------------------------ inside

    def _index(self, timer: Timer) -> bool:
        """Add a timer to the pending index; False if its id is pending already."""
        number = self._topics.number(timer.topic)
        assert number <= _TOPIC_MASK, "more topics with timers than a packed entry numbers"
        if not self.pending.add(timer.id, timer.due_ms << _TOPIC_BITS | number, check_of(timer)):
            return False
        start = bucket_of(timer.due_ms, self.bucket_ms)
        self._per_bucket[start] = self._per_bucket.get(start, 0) + 1
        return True

    def _count_out(self, due_ms: int) -> None:
        start = bucket_of(due_ms, self.bucket_ms)
        left = self._per_bucket[start] - 1
        if left:
            self._per_bucket[start] = left
        else:
            del self._per_bucket[start]

    def _unpack(self, packed: int) -> tuple[int, str]:
        return packed >> _TOPIC_BITS, self._topics.name(packed & _TOPIC_MASK)

    def _hold(self, timer: Timer) -> None:
        self.near[timer.id] = timer
        heapq.heappush(self._heap, (timer.due_ms, timer.id))

    def _remember(self, info: TimerInfo) -> None:
        self.history.remember(info)

    def _unflushed(self, due_ms: int) -> Unflushed:
        start = bucket_of(due_ms, self.bucket_ms)
        part = self.unflushed.get(start)
        if part is None:
            part = self.unflushed[start] = Unflushed()
        return part
