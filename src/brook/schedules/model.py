"""A periodic schedule: what it appends, when, and where it stands. Pure: no I/O.

Slots come from a cron expression (five fields, read by `cronsim`, in the
schedule's time zone, so "0 9 * * *" is nine in the morning there all year round)
or a fixed interval (`every_ms`: slots at whole multiples of it since the epoch,
so every broker and every restart agrees on them). Each slot is fired by one
timer whose id names the slot (`sched:<name>:<slot ms>`): a timer id is taken
once, so a slot appends at most one record, whatever restarts or take-overs
come between arming it and seeing it fired.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from cronsim import CronSim, CronSimError

from brook import limits, names
from brook.errors import BadRequest

Missed = Literal["skip", "run_once"]
MISSED = ("skip", "run_once")


class Spec(msgspec.Struct, frozen=True, kw_only=True):
    """What a schedule appends and when: a user's definition."""

    name: str
    topic: str
    cron: str | None = None
    every_ms: int | None = None
    tz: str = "UTC"
    missed: str = "skip"
    """After the broker was down over a slot: `skip` it (the next slot runs), or
    `run_once` (one record for all the slots missed, at once)."""
    value: bytes = b""
    key: bytes | None = None
    headers: dict[str, bytes] | None = None

    def timing(self) -> tuple[str | None, int | None, str]:
        return self.cron, self.every_ms, self.tz


class State(msgspec.Struct, frozen=True, kw_only=True):
    """Where a schedule stands."""

    paused: bool = False
    next_ms: int | None = None
    """The slot armed (its timer pending), or None while paused."""
    last_slot_ms: int | None = None
    last_fired_ms: int | None = None
    """When the last slot's record was appended (its timer fired)."""
    last_partition: int | None = None
    last_offset: int | None = None
    fired: int = 0
    skipped: int = 0
    created_ms: int = 0
    version: int = 0
    """How many times the definition was changed: its slots' timers are named by it, so a
    change re-arms a slot under a new timer (a timer id is taken once: the cancelled one
    of the old definition could not be armed again)."""


class Stored(msgspec.Struct, frozen=True):
    spec: Spec
    state: State

    def timer(self, slot_ms: int) -> str:
        """The id of the timer that fires this definition's slot `slot_ms`."""
        return timer_id(self.spec.name, slot_ms, self.state.version)


def timer_id(name: str, slot_ms: int, version: int = 0) -> str:
    """`sched:<name>:<slot ms>`, then `:<version>` once the definition was changed."""
    return f"sched:{name}:{slot_ms}" + (f":{version}" if version else "")


def check(spec: Spec) -> Spec:
    """The spec, checked: BadRequest or InvalidName naming what is wrong."""
    if not names.NAME.fullmatch(spec.name) or len(spec.name) > limits.schedule_name_chars_max:
        raise BadRequest(
            f"a schedule's name is 1 to {limits.schedule_name_chars_max} of "
            f"A-Z a-z 0-9 . _ -, not {spec.name!r}"
        )
    if (spec.cron is None) == (spec.every_ms is None):
        raise BadRequest("a schedule needs cron or every_ms (one of them)")
    if spec.every_ms is not None and not (
        limits.schedule_every_ms_min <= spec.every_ms <= limits.timer_horizon_ms_max
    ):
        raise BadRequest(
            f"every_ms must be from {limits.schedule_every_ms_min} to "
            f"{limits.timer_horizon_ms_max}, not {spec.every_ms}"
        )
    if spec.missed not in MISSED:
        raise BadRequest(f"missed must be 'skip' or 'run_once', not {spec.missed!r}")
    zone(spec.tz)
    if spec.cron is not None:
        try:
            CronSim(spec.cron, datetime.now(UTC))
        except CronSimError as exc:
            raise BadRequest(f"cron {spec.cron!r} is not a cron expression: {exc}") from None
    return spec


def zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadRequest(f"tz {tz!r} is not a time zone (for example UTC, Europe/Berlin)") from None


def next_slot(spec: Spec, after_ms: int) -> int:
    """The first slot strictly after `after_ms` (ms since the epoch)."""
    if spec.every_ms is not None:
        return (after_ms // spec.every_ms + 1) * spec.every_ms
    assert spec.cron is not None
    start = datetime.fromtimestamp(after_ms / 1000, zone(spec.tz))
    for found in CronSim(spec.cron, start):
        slot = math.floor(found.timestamp() * 1000)
        if slot > after_ms:
            return slot
    raise BadRequest(f"cron {spec.cron!r} never comes round")
