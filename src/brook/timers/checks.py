"""Timers as users give them, checked: into `Timer`s, or BadRequest. Pure."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from brook import limits, validate
from brook.errors import BadRequest
from brook.timers.model import Timer

_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")
HORIZON_MS_MAX = 100 * 365 * 24 * 60 * 60 * 1000
"""Timers may be due up to a century ahead."""


class TimerSpec(msgspec.Struct, frozen=True):
    """A timer to schedule (for `schedule_many`): due `at` (ms since the epoch) or
    after `delay_ms`, or now when neither is given."""

    topic: str
    value: bytes
    at: int | None = None
    delay_ms: int | None = None
    key: bytes | None = None
    headers: dict[str, bytes] | None = None
    timer_id: str | None = None


def timer_id(value: Any) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise BadRequest(
            f"invalid timer_id {value!r}: use 1 to {limits.timer_id_chars_max} of "
            "A-Z a-z 0-9 . _ : -"
        )
    return value


def due_ms(at: Any, delay_ms: Any, now_ms: int) -> int:
    """When a timer is due: `at`, or `delay_ms` from now, or now."""
    if at is not None and delay_ms is not None:
        raise BadRequest("give at or delay_ms, not both")
    if at is not None:
        due = validate.whole(at, "at", 0)
    elif delay_ms is not None:
        due = now_ms + validate.whole(delay_ms, "delay_ms", 0)
    else:
        due = now_ms
    if due > now_ms + HORIZON_MS_MAX:
        raise BadRequest("a timer may be due at most 100 years ahead")
    return due


def timer(spec: TimerSpec, now_ms: int, new_id: Any) -> Timer:
    """A checked Timer from a spec; `new_id()` names it when the spec does not."""
    validate.topic_name(spec.topic)
    record, _ = validate.record(spec.value, spec.key, spec.headers)
    return Timer(
        new_id() if spec.timer_id is None else timer_id(spec.timer_id),
        spec.topic,
        due_ms(spec.at, spec.delay_ms, now_ms),
        record.value,
        record.key,
        record.headers,
    )
