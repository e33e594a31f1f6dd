"""What a timer is, in memory, in the timer log and in bucket files. (What users are
told of one, `TimerInfo` and `TimerPage`, are public types: brook/models.py.)"""

from __future__ import annotations

import re

import msgspec

from brook import names


class Timer(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A record to append to `topic` at `due_ms` (ms since the epoch)."""

    id: str
    topic: str
    due_ms: int
    value: bytes
    key: bytes | None = None
    headers: dict[str, bytes] | None = None


def cursor_of(due_ms: int, timer_id: str) -> str:
    return f"{due_ms}:{timer_id}"


def parse_cursor(cursor: str) -> tuple[int, str] | None:
    """(due_ms, timer id) from a page's `next`; None if it is not one."""
    if not re.fullmatch(names.TIMER_CURSOR_PATTERN.strip("^$"), cursor):
        return None
    due, _, timer_id = cursor.partition(":")
    return int(due), timer_id
