"""The JSON shapes of timers and periodic schedules (docs/PROTOCOL.md)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta

from brook import limits, validate
from brook.models import TimerInfo, TimerPage
from brook.names import (
    Id,
    Name,
)
from brook.records import (
    Record,
    ScheduleInfo,
)
from brook.wire.core import Count, In, Millis, Offset, Out, RecordFields, _texts, request, text_of

# ---------------------------------------------------------------- timers


class TimerIn(RecordFields, kw_only=True):
    one_at_most: ClassVar[tuple[tuple[str, str], ...]] = (
        *RecordFields.one_at_most,
        ("at", "delay_ms"),
    )

    topic: Name
    at: Annotated[int, Meta(ge=0, description="Due time, ms since the epoch")] | None = None
    delay_ms: Millis | None = None
    timer_id: Id | None = None


class ScheduleIn(RecordFields, kw_only=True):
    """PUT /v1/schedules/{schedule}: a periodic schedule's whole definition."""

    one_at_least: ClassVar[tuple[tuple[str, str], ...]] = ()
    one_at_most: ClassVar[tuple[tuple[str, str], ...]] = (
        *RecordFields.one_at_most,
        ("cron", "every_ms"),
    )

    topic: Name
    cron: Annotated[str, Meta(min_length=1, max_length=limits.cron_chars_max)] | None = None
    every_ms: (
        Annotated[int, Meta(ge=limits.schedule_every_ms_min, le=limits.timer_horizon_ms_max)] | None
    ) = None
    tz: Annotated[str, Meta(min_length=1, max_length=limits.timezone_chars_max)] = "UTC"
    missed: Literal["skip", "run_once"] = "skip"

    def arguments(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "cron": self.cron,
            "every_ms": self.every_ms,
            "tz": self.tz,
            "missed": self.missed,
            **self.record_arguments(),
        }

    @classmethod
    def of_arguments(cls, **arguments: Any) -> ScheduleIn:
        validate.topic_name(arguments.get("topic"))
        return request(cls, **cls.record_fields(arguments))

    def record(self) -> Record:
        """The record each slot appends (an empty value when none is given)."""
        if self.value is None and self.value_b64 is None:
            self.value_b64 = b""
        return super().record()


class ScheduleOut(Out, omit_defaults=True):
    name: str
    topic: str
    tz: str
    missed: str
    paused: bool
    fired: Count
    skipped: Count
    created_ms: int
    value_b64: bytes
    headers_b64: dict[str, bytes]
    cron: str | None = None
    every_ms: int | None = None
    next_ms: int | None = None
    last_slot_ms: int | None = None
    last_fired_ms: int | None = None
    last_partition: Count | None = None
    last_offset: Offset | None = None
    value: str | None = None
    key_b64: bytes | None = None
    key: str | None = None
    headers: dict[str, str] | None = None

    @classmethod
    def of(cls, info: ScheduleInfo) -> ScheduleOut:
        fields = msgspec.structs.asdict(info)
        value, key, headers = fields.pop("value"), fields.pop("key"), fields.pop("headers")
        return cls(
            **fields,
            value_b64=value,
            value=text_of(value),
            key_b64=key,
            key=None if key is None else text_of(key),
            headers_b64=headers or {},
            headers=_texts(headers) if headers else None,
        )

    def returned(self) -> ScheduleInfo:
        return self.info()

    def info(self) -> ScheduleInfo:
        return ScheduleInfo(
            name=self.name,
            topic=self.topic,
            cron=self.cron,
            every_ms=self.every_ms,
            tz=self.tz,
            missed=self.missed,
            paused=self.paused,
            next_ms=self.next_ms,
            last_slot_ms=self.last_slot_ms,
            last_fired_ms=self.last_fired_ms,
            last_partition=self.last_partition,
            last_offset=self.last_offset,
            fired=self.fired,
            skipped=self.skipped,
            created_ms=self.created_ms,
            value=self.value_b64,
            key=self.key_b64,
            headers=self.headers_b64 or None,
        )


class Schedules(Out):
    schedules: list[ScheduleOut]

    @classmethod
    def of(cls, infos: list[ScheduleInfo]) -> Schedules:
        return cls(schedules=[ScheduleOut.of(info) for info in infos])

    def returned(self) -> list[ScheduleInfo]:
        return [s.info() for s in self.schedules]


class TimersIn(In):
    timers: Annotated[list[TimerIn], Meta(max_length=limits.schedule_timers_max)]


class Scheduled(Out):
    timer_id: str


class ScheduledMany(Out):
    timer_ids: list[str]


class TimerOut(Out, omit_defaults=True):
    timer_id: str
    state: Literal["pending", "fired", "cancelled"]
    topic: str
    due_ms: int
    partition: Count | None = None
    offset: Offset | None = None
    fired_at_ms: int | None = None
    cancelled_at_ms: int | None = None

    def returned(self) -> TimerInfo:
        return TimerInfo(
            self.timer_id,
            self.state,
            self.topic,
            self.due_ms,
            self.partition,
            self.offset,
            self.fired_at_ms if self.state == "fired" else self.cancelled_at_ms,
        )


class TimersPage(Out):
    timers: list[TimerOut]
    next: str | None = None
    """The cursor for the page after (the `after` parameter); null on the last page."""

    def returned(self) -> TimerPage:
        return TimerPage([t.returned() for t in self.timers], self.next)


class Cancelled(Out):
    cancelled: str
