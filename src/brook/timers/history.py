"""Fired and cancelled timers, remembered for a while (timer_history_ms, at most
timer_history_max): `timer(id)` tells where one fired, and a second schedule of
its id is known for a repeat.

As a TimerInfo per timer in an ordered dict, the history cost about 360 bytes a
timer in Python objects: 36 MB at its bound, filling for a day, and the 30-minute
soak's server grew with it (docs/RELIABILITY.md). Here a timer is one row of
arrays (id_index.RowLog): about 110 to 170 bytes a timer, and no object per timer.
"""

from __future__ import annotations

from brook.id_index import Numbers, RowLog
from brook.models import TimerInfo

_CANCELLED = -1
"""The partition of a cancelled timer's row (a fired one has its real partition)."""


class TimerHistory:
    def __init__(self, topics: Numbers) -> None:
        self._rows = RowLog(due="q", at="q", offset="q", partition="i", topic="I")
        self._due = self._rows.column("due")
        self._at = self._rows.column("at")
        self._offset = self._rows.column("offset")
        self._partition = self._rows.column("partition")
        self._topic = self._rows.column("topic")
        self._topics = topics
        """The book's numbering of topics, shared."""

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, timer_id: str) -> bool:
        return timer_id in self._rows

    def remember(self, info: TimerInfo) -> None:
        """Add a fired or cancelled timer as the newest (it replaces an older row of its id)."""
        fired = info.state == "fired" and info.partition is not None
        self._rows.add(
            info.timer_id,
            info.due_ms,
            info.at_ms or 0,
            info.offset or 0,
            info.partition if fired and info.partition is not None else _CANCELLED,
            self._topics.number(info.topic),
        )

    def get(self, timer_id: str) -> TimerInfo | None:
        i = self._rows.find(timer_id)
        if i is None:
            return None
        partition = self._partition[i]
        topic = self._topics.name(self._topic[i])
        if partition == _CANCELLED:
            return TimerInfo(timer_id, "cancelled", topic, self._due[i], at_ms=self._at[i])
        return TimerInfo(
            timer_id, "fired", topic, self._due[i], partition, self._offset[i], self._at[i]
        )

    def forget_old(self, horizon_ms: int, most: int) -> None:
        """Forget, oldest first, timers that ended before `horizon_ms` and any beyond `most`."""
        self._rows.forget_oldest("at", horizon_ms, most)
