"""What a timer is, in memory, in the timer log and in bucket files."""

from __future__ import annotations

import msgspec


class Timer(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A record to append to `topic` at `due_ms` (ms since the epoch)."""

    id: str
    topic: str
    due_ms: int
    value: bytes
    key: bytes | None = None
    headers: dict[str, bytes] | None = None


class TimerInfo(msgspec.Struct, frozen=True):
    """What `b.timer(id)` tells: a timer's state, and where it fired."""

    timer_id: str
    state: str
    """"pending", "fired" or "cancelled"."""
    topic: str
    due_ms: int
    partition: int | None = None
    """Where the record was appended, once fired."""
    offset: int | None = None
    at_ms: int | None = None
    """When it fired or was cancelled."""
