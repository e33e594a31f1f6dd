"""Durations as people write them, for reasons and messages: `10 s`, `3 min`,
`2 h 5 min`, `5 days`, never `0.00277778 h`. Pure."""

from __future__ import annotations

SECOND_MS = 1000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS


def words(ms: float) -> str:
    """`ms` in its two largest units, the smaller one left out when it is zero and cut,
    never rounded up (59,999 ms is `59 s`, not `60 s`): `250 ms`, `1.5 s`, `10 s`,
    `3 min 20 s`, `2 h 5 min`, `1 day`, `2 days 4 h`. A negative duration reads as 0."""
    whole = max(0, int(ms))
    if whole < SECOND_MS:
        return f"{whole} ms"
    if whole < 10 * SECOND_MS:
        tenths = whole // 100
        return f"{tenths // 10} s" if tenths % 10 == 0 else f"{tenths / 10:.1f} s"
    if whole < MINUTE_MS:
        return f"{whole // SECOND_MS} s"
    if whole < HOUR_MS:
        return _two(whole, MINUTE_MS, "min", SECOND_MS, "s")
    if whole < DAY_MS:
        return _two(whole, HOUR_MS, "h", MINUTE_MS, "min")
    days, rest = divmod(whole, DAY_MS)
    said = f"{days} day" if days == 1 else f"{days} days"
    hours = rest // HOUR_MS
    return f"{said} {hours} h" if hours else said


def _two(ms: int, unit_ms: int, unit: str, part_ms: int, part: str) -> str:
    count, rest = divmod(ms, unit_ms)
    parts = rest // part_ms
    return f"{count} {unit} {parts} {part}" if parts else f"{count} {unit}"
