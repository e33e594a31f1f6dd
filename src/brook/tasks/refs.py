"""What enqueueing gives and takes: a job's reference (`JobRef`), where it stands
(`JobStatus`), the options of one enqueue, and the exceptions a task raises to retry or
discard its job. Values only: the task layer's own leaf."""

from __future__ import annotations

import datetime
import logging
import re
from typing import TYPE_CHECKING, Any

import msgspec

from brook import limits, names, scheduling
from brook.errors import BadRequest

if TYPE_CHECKING:
    pass


log = logging.getLogger("brook.tasks")


GROUP = "tasks"
"""The queue group every task's jobs are leased through."""


TOPIC_PREFIX = "tasks."


SCHEDULE_PREFIX = "task."
"""A periodic task's schedule is named this and the task's name."""


OPTIONS = ("key", "priority", "delay_ms", "eta", "idempotency_key", "debounce_ms")
"""Enqueue options: `task.enqueue` takes them as keywords, so no parameter may be
named so (unless the task is declared options_only)."""


class Retry(Exception):
    """Raise in a task to have it run again after `delay_ms` (default: the task's
    backoff); it counts as an attempt."""

    def __init__(self, reason: str = "", delay_ms: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay_ms = delay_ms


class Discard(Exception):
    """Raise in a task to give its job up at once: dead, with `reason`, no more attempts."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class JobRef(msgspec.Struct, frozen=True):
    """Names one job: its record. `str(ref)` is `topic/partition/offset`, and
    `JobRef.parse` reads it back (to keep in a database, or pass in a URL).

    A job a canvas enqueues later (a chain's link, a chord's callback) is named by
    the broker join that will append it (`join`; partition and offset are -1 until
    then): `topic/after/<join>`. `app.result`, `app.job` and `app.revoke` take either."""

    topic: str
    partition: int
    offset: int
    join: str | None = None
    existing: bool = False
    """From `enqueue` of a unique task: True when a live job of the same identity was
    there already and nothing was enqueued (this is that job). Not part of equality."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobRef) and (
            (self.topic, self.partition, self.offset, self.join)
            == (other.topic, other.partition, other.offset, other.join)
        )

    def __hash__(self) -> int:
        return hash((self.topic, self.partition, self.offset, self.join))

    def __str__(self) -> str:
        if self.join is not None:
            return f"{self.topic}/after/{self.join}"
        return f"{self.topic}/{self.partition}/{self.offset}"

    @classmethod
    def parse(cls, text: str) -> JobRef:
        topic, _, rest = str(text).partition("/")
        partition, _, offset = rest.partition("/")
        if names.NAME.fullmatch(topic) and partition == "after" and names.ID.fullmatch(offset):
            return cls(topic, -1, -1, offset)
        whole = "0|[1-9][0-9]{0,18}"  # ASCII digits only, no leading zero: one spelling a job
        if not (
            names.NAME.fullmatch(topic)
            and re.fullmatch(whole, partition, re.ASCII)
            and re.fullmatch(whole, offset, re.ASCII)
            and int(partition) <= limits.whole_max
            and int(offset) <= limits.whole_max
        ):
            raise BadRequest(
                f"{text!r} is not a job reference (topic/partition/offset, or topic/after/join)"
            )
        return cls(topic, int(partition), int(offset))


class JobStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Where a job stands (`app.job(ref)`): its queue state (brook.JobInfo's states:
    pending, ready, delayed, leased, retrying, acked, dead, unknown), attempts so far,
    why the last one failed, and what it returned (decoded JSON) while kept."""

    ref: JobRef
    state: str
    attempts: int
    error: str
    result: Any = None
    finished_ms: int | None = None
    due_ms: int | None = None

    @property
    def done(self) -> bool:
        """Finished for good: acked or dead."""
        return self.state in ("acked", "dead")


class EnqueueOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How a job is enqueued, apart from its call: its record key (per-key limits and
    fairness act on it), priority, delay from now, and idempotency key."""

    key: str | bytes | None = None
    priority: int | None = None
    delay_ms: int | None = None
    idempotency_key: str | None = None
    eta: datetime.datetime | None = None
    """Not before this time (timezone-aware); with delay_ms too, the later one holds."""
    debounce_ms: int | None = None
    """Keep only the last of a burst: a waiting job of the same identity is cancelled
    and this one runs `debounce_ms` from now (unless enqueued again before then)."""

    def checked(self) -> EnqueueOptions:
        """Itself; raises BadRequest naming the option that is not what it must be."""
        if self.key is not None and not isinstance(self.key, str | bytes):
            raise BadRequest(f"key must be a str or bytes, not {type(self.key).__name__}")
        if self.idempotency_key is not None and not isinstance(self.idempotency_key, str):
            raise BadRequest(
                f"idempotency_key must be a str, not {type(self.idempotency_key).__name__}"
            )
        for name in ("priority", "delay_ms", "debounce_ms"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise BadRequest(f"{name} must be an int, not {type(value).__name__}")
        if self.eta is not None:
            if not isinstance(self.eta, datetime.datetime):
                raise BadRequest(f"eta must be a datetime, not {type(self.eta).__name__}")
            if self.eta.utcoffset() is None:
                raise BadRequest(
                    "eta must be timezone-aware (a naive datetime names no moment): "
                    "datetime.now(timezone.utc) + timedelta(...), or .astimezone()"
                )
        scheduling.headers(  # their bounds
            priority=self.priority, delay_ms=self.delay_ms, not_before=self.not_before_ms
        )
        if self.debounce_ms is not None:
            if not 1 <= self.debounce_ms <= limits.timer_horizon_ms_max:
                raise BadRequest(f"debounce_ms must be from 1 to {limits.timer_horizon_ms_max}")
            if self.idempotency_key is not None:
                raise BadRequest("give debounce_ms or idempotency_key, not both")
        return self

    @property
    def not_before_ms(self) -> int | None:
        return None if self.eta is None else int(self.eta.timestamp() * 1000)


NO_OPTIONS = EnqueueOptions()
