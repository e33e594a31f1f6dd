"""The record headers queue groups schedule by: a priority and a not-before time.

Any record may carry them, written by any producer (the task layer, the HTTP API,
`brook produce`): they are part of the record, so a group rebuilt after a crash, a
take-over or a new group reading the topic from the start schedules it exactly as
before, with no state of its own to keep.

- `brook.priority`: a whole number from -1000 to 1000 (default 0); higher goes first.
- `brook.not_before`: ms since the epoch; no group leases the record before then.
- `brook.delay_ms`: ms after the record's own timestamp (which the broker assigns,
  so a producer's clock does not matter); with both, the later time holds.

Values are ASCII decimal. Appends check them (a bad one is a 400, never a record
no group can schedule); records written otherwise read as unscheduled.
"""

from __future__ import annotations

from collections.abc import Mapping

from brook import limits
from brook.errors import BadRequest

PRIORITY = "brook.priority"
NOT_BEFORE = "brook.not_before"
DELAY_MS = "brook.delay_ms"
NAMES = (PRIORITY, NOT_BEFORE, DELAY_MS)

Schedule = tuple[int, int | None]
"""(priority, not-before time in epoch ms or None) of a record that has either."""

_BOUNDS = {
    PRIORITY: (limits.priority_min, limits.priority_max),
    NOT_BEFORE: (0, limits.not_before_ms_max),
    DELAY_MS: (0, limits.timer_horizon_ms_max),
}


def headers(
    priority: int | None = None, delay_ms: int | None = None, not_before: int | None = None
) -> dict[str, bytes]:
    """The headers that give a record these (None leaves one out), checked."""
    given = {PRIORITY: priority, DELAY_MS: delay_ms, NOT_BEFORE: not_before}
    out = {name: str(value).encode() for name, value in given.items() if value is not None}
    check(out)
    return out


def check(record_headers: Mapping[str, bytes]) -> None:
    """Raise BadRequest if one of the scheduling headers is not a number in its bounds."""
    for name in NAMES:
        raw = record_headers.get(name)
        if raw is not None and _number(name, raw) is None:
            low, high = _BOUNDS[name]
            raise BadRequest(
                f"header {name} must be a whole number from {low} to {high} "
                f"(ASCII digits), not {bytes(raw)[:40]!r}"
            )


def of(record_headers: Mapping[str, bytes] | None, timestamp_ms: int) -> Schedule | None:
    """The record's priority and not-before time, or None when it has neither."""
    if not record_headers:
        return None
    priority = _number(PRIORITY, record_headers.get(PRIORITY))
    at = _number(NOT_BEFORE, record_headers.get(NOT_BEFORE))
    delay = _number(DELAY_MS, record_headers.get(DELAY_MS))
    if delay is not None:
        at = max(at or 0, timestamp_ms + delay)
    if not priority and at is None:
        return None
    return priority or 0, at


def _number(name: str, raw: bytes | None) -> int | None:
    if raw is None or not 0 < len(raw) <= 20:
        return None
    text = bytes(raw)
    digits = text[1:] if text[:1] == b"-" else text
    if not digits.isdigit():
        return None
    value = int(text)
    low, high = _BOUNDS[name]
    return value if low <= value <= high else None
