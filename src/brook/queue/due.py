"""When each queue group next needs time to act (a lease ends, a retry is due),
kept in a heap as the groups change: the ticker pops the groups that are due,
so a pass costs the groups due, not every group the broker has. Asking
thousands of idle groups their next due time twice a pass was half of a busy
broker's CPU with a topic per customer and event type."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

S = TypeVar("S", bound=Hashable)


class DueTimes(Generic[S]):
    """Subjects with the time each is next due. Thread-safe. A subject has one
    due time at most: setting it again replaces the old one (whose heap entry is
    skipped when it surfaces)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heap: list[tuple[int, int, S]] = []
        self._due: dict[S, int] = {}
        self._serial = itertools.count()

    def set(self, subject: S, due_ms: int | None) -> bool:
        """`subject` is next due at `due_ms` (None: never, until set again).
        Returns whether that is earlier than every other due time, so a sleeping
        ticker knows to wake."""
        with self._lock:
            if due_ms is None:
                self._due.pop(subject, None)
                return False
            if self._due.get(subject) == due_ms:
                return False
            self._due[subject] = due_ms
            earliest = not self._heap or due_ms < self._heap[0][0]
            heapq.heappush(self._heap, (due_ms, next(self._serial), subject))
            if len(self._heap) > 4 * len(self._due) + 64:
                self._compact()
            return earliest

    def forget(self, subject: S) -> None:
        with self._lock:
            self._due.pop(subject, None)

    def pop_due(self, now_ms: int) -> list[S]:
        """The subjects due at or before `now_ms`, earliest first; each is
        removed (set it again once it has acted)."""
        out = []
        with self._lock:
            heap, due = self._heap, self._due
            while heap and heap[0][0] <= now_ms:
                at, _, subject = heapq.heappop(heap)
                if due.get(subject) == at:
                    del due[subject]
                    out.append(subject)
        return out

    def next_ms(self) -> int | None:
        """The earliest due time, or None when nothing is due ever."""
        with self._lock:
            heap, due = self._heap, self._due
            while heap and due.get(heap[0][2]) != heap[0][0]:
                heapq.heappop(heap)
            return heap[0][0] if heap else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._due)

    def _compact(self) -> None:
        """Drop the replaced entries (holding the lock): a group whose due time
        moves on every lease leaves one behind each time."""
        due = self._due
        self._heap = [e for e in self._heap if due.get(e[2]) == e[0]]
        heapq.heapify(self._heap)
