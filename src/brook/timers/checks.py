"""Timers as users give them, checked: into `Timer`s, or BadRequest. Pure."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from brook import limits, validate
from brook.errors import BadRequest
from brook.models import TimerSpec
from brook.timers.model import Timer

HORIZON_MS_MAX = limits.timer_horizon_ms_max


def due_ms(at: Any, delay_ms: Any, now_ms: int) -> int:
    """When a timer is due: `at`, or `delay_ms` from now, or now. An `at` more than
    timer_at_past_max_ms ago is refused: it is almost always seconds given as
    milliseconds (1800000000 is January 1970, not 2027)."""
    if at is not None and delay_ms is not None:
        raise BadRequest("give at or delay_ms, not both")
    if at is not None:
        due = validate.whole(at, "at", 0)
        if due < now_ms - limits.timer_at_past_max_ms:
            raise BadRequest(_too_old(due, now_ms))
    elif delay_ms is not None:
        due = now_ms + validate.whole(delay_ms, "delay_ms", 0)
    else:
        due = now_ms
    if due > now_ms + HORIZON_MS_MAX:
        years = HORIZON_MS_MAX // (365 * 86_400_000)
        raise BadRequest(f"a timer may be due at most {years} years ahead")
    return due


def _too_old(at: int, now_ms: int) -> str:
    when = datetime.datetime.fromtimestamp(at / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    hint = ""
    if now_ms - limits.timer_at_past_max_ms <= at * 1000 <= now_ms + HORIZON_MS_MAX:
        hint = f" (if {at} is in seconds, give at={at * 1000})"
    limit_h = limits.timer_at_past_max_ms // 3_600_000
    return (
        f"at={at} is {when}, more than {limit_h} hours ago: at is in milliseconds since the "
        f"epoch{hint}; for a timer due now, leave at and delay_ms out"
    )


def timers(
    specs: Sequence[TimerSpec],
    now_ms: int,
    new_ids: Iterator[str],
    record_bytes_max: int = limits.record_bytes_max_default,
) -> list[Timer]:
    """Checked Timers from specs; those without an id are named by `new_ids` in turn.
    Each topic is checked once; a plain bytes value needs no more than a type check."""
    for topic in {spec.topic for spec in specs}:
        validate.topic_name(topic)
    out = []
    latest = now_ms + HORIZON_MS_MAX
    earliest = now_ms - limits.timer_at_past_max_ms
    for spec in specs:
        at, value = spec.at, spec.value
        if (
            type(at) is int  # exactly int: a bool is refused, as validate.whole does
            and spec.delay_ms is None
            and earliest <= at <= latest
            and type(value) is bytes
            and len(value) <= record_bytes_max
            and spec.key is None
            and spec.headers is None
        ):
            due = at
        else:
            record, _ = validate.record(
                value, spec.key, spec.headers, record_bytes_max=record_bytes_max
            )
            value = record.value
            due = due_ms(at, spec.delay_ms, now_ms)
            spec = msgspec.structs.replace(spec, key=record.key, headers=record.headers)
        out.append(
            Timer(
                next(new_ids) if spec.timer_id is None else validate.timer_id(spec.timer_id),
                spec.topic,
                due,
                value,
                spec.key,
                spec.headers,
            )
        )
    return out
