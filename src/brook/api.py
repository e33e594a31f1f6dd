"""Brook's Python API as types: what `brook.open` (embedded) and `brook.connect`
(remote) both give, so a program written against these runs on either.

mypy checks that the embedded broker and the sync client conform (the end of
brook/__init__.py); the async client is the same code with coroutines (the sync
client is made from it: scripts/unasync.py), and tests/api/test_parity.py holds the
three to the same parameters, names and defaults at run time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Protocol

from brook import limits
from brook.models import (
    Ack,
    Attempt,
    Backoff,
    DeadRecord,
    DeliveryStats,
    EndpointInfo,
    ErrorGroup,
    EventTypeInfo,
    Job,
    JobInfo,
    JoinInfo,
    JoinSpec,
    LakeStatus,
    MessageAttempts,
    PortalLink,
    Published,
    Record,
    Resent,
    ScheduleInfo,
    TestResult,
    TimerInfo,
    TimerPage,
    TimerSpec,
    TopicInfo,
    Transition,
    UniqueAck,
)


class TopicApi(Protocol):
    """`b.topic(name)`."""

    name: str

    def append(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
        idempotency_key: bytes | str | None = None,
    ) -> Ack: ...

    def append_many(
        self,
        records: Iterable[Record],
        idempotency_keys: Sequence[bytes | str | None] | None = None,
        partition: int | None = None,
    ) -> list[Ack]: ...

    def read(
        self, partition: int = 0, offset: int = 0, limit: int = limits.read_records_default
    ) -> list[Record]: ...

    def end_offsets(self) -> dict[int, int]: ...

    def start_offsets(self) -> dict[int, int]: ...

    def stage(
        self,
        writer: str,
        seq: int,
        part: str,
        chunk: int,
        records: Iterable[Record],
        partition: int | None = None,
    ) -> bool: ...

    def publish(self, writer: str, seq: int, parts: dict[str, int]) -> Published: ...

    def drop_staged(self, writer: str, seq: int) -> bool: ...


class ConsumerApi(Protocol):
    """`b.consumer(topic, group)`: a member of a stream group."""

    topic: str
    group: str

    def poll(
        self,
        max_records: int = limits.poll_records_default,
        timeout: float = limits.poll_wait_s_default,
    ) -> list[Record]: ...

    def commit(self, offsets: dict[int, int] | None = None) -> None: ...

    def seek(self, partition: int, offset: int) -> None: ...

    def position(self) -> dict[int, int]: ...

    def committed(self) -> dict[int, int]: ...

    def lag(self) -> dict[int, int]: ...

    def close(self) -> None: ...


class QueueApi(Protocol):
    """`b.queue(topic, group)`: a queue group."""

    topic: str
    group: str

    def lease(
        self,
        max_records: int = limits.lease_records_default,
        timeout: float = limits.poll_wait_s_default,
        visibility_timeout_ms: int | None = None,
    ) -> list[Job]: ...

    def ack(self, jobs: Any, results: Sequence[bytes | None] | None = None) -> None: ...

    def job(self, partition: int, offset: int, timeout: float = 0.0) -> JobInfo: ...

    def nack(self, jobs: Any, delay_ms: int | None = None, reason: str = "") -> None: ...

    def release(self, jobs: Any, delay_ms: int | None = None, reason: str = "") -> None: ...

    def extend(self, jobs: Any, ms: int) -> None: ...

    def discard(self, jobs: Any, reason: str = "") -> None: ...

    def stats(self) -> dict[str, int]: ...

    def trace(self, partition: int, offset: int) -> list[Transition]: ...

    def redrive(
        self, limit: int | None = None, records: Iterable[tuple[int, int]] | None = None
    ) -> int: ...

    def cancel(
        self,
        records: Iterable[tuple[int, int]] | None = None,
        key: bytes | str | None = None,
        reason: str = "",
    ) -> list[tuple[int, int]]: ...

    def enqueue_unique(
        self,
        identity: str,
        value: bytes,
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
        replace: bool = False,
    ) -> UniqueAck: ...

    def settings(self) -> dict[str, Any]: ...

    def dead_errors(self) -> list[ErrorGroup]: ...

    def dead_records(
        self,
        error: str,
        after: tuple[int, int] | None = None,
        limit: int = limits.dead_records_page_default,
    ) -> list[DeadRecord]: ...


class EndpointApi(Protocol):
    """`b.endpoint(name)`: a delivery endpoint."""

    name: str

    def info(self) -> EndpointInfo: ...

    def stats(self) -> DeliveryStats: ...

    def attempts(self, topic: str, partition: int, offset: int) -> list[Attempt]: ...

    def redrive(
        self,
        topic: str | None = None,
        limit: int | None = None,
        records: Iterable[tuple[int, int]] | None = None,
    ) -> int: ...

    def replay(
        self,
        topic: str | None = None,
        since_ms: int | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> int: ...

    def resend(self, webhook_id: str) -> Resent: ...

    def dead_errors(self, topic: str | None = None) -> list[ErrorGroup]: ...

    def enable(self) -> EndpointInfo: ...

    def disable(self) -> EndpointInfo: ...

    def rotate_secret(self, secret: str | None = None) -> str: ...

    def test(self) -> TestResult: ...


class BrokerApi(Protocol):
    """A broker: `brook.open(location)` or `brook.connect(url)`."""

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        compaction: bool = False,
        lake: bool | None = None,
        value_schema: dict[str, Any] | None = None,
    ) -> TopicInfo: ...

    def topics(self) -> list[TopicInfo]: ...

    def delete_topic(self, name: str) -> None: ...

    def lake_sync(self, topic: str | None = None) -> list[LakeStatus]: ...

    def lake_status(self, topic: str | None = None) -> list[LakeStatus]: ...

    def topic(self, name: str) -> TopicApi: ...

    def consumer(self, topic: str, group: str, start: str = "earliest") -> ConsumerApi: ...

    def queue(
        self,
        topic: str,
        group: str,
        visibility_timeout_ms: int | None = None,
        max_attempts: int | None = None,
        ordering: str | None = None,
        dead_letter_topic: str | None = None,
        backoff: Backoff | dict[str, Any] | None = None,
        expire_after_ms: int | None = None,
        concurrency_per_key: int | None = None,
        key_rate_limit_per_s: float | None = None,
        rate_limit_per_s: float | None = None,
        lower_priority_share: float | None = None,
        create: bool = True,
    ) -> QueueApi: ...

    def create_joins(self, joins: Sequence[JoinSpec]) -> list[JoinInfo]: ...

    def join(self, join_id: str, timeout: float = 0.0) -> JoinInfo: ...

    def put_schedule(
        self,
        name: str,
        topic: str,
        value: bytes = b"",
        cron: str | None = None,
        every_ms: int | None = None,
        tz: str = "UTC",
        missed: str = "skip",
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
    ) -> ScheduleInfo: ...

    def get_schedule(self, name: str) -> ScheduleInfo: ...

    def list_schedules(self) -> list[ScheduleInfo]: ...

    def pause_schedule(self, name: str) -> ScheduleInfo: ...

    def resume_schedule(self, name: str) -> ScheduleInfo: ...

    def delete_schedule(self, name: str) -> bool: ...

    def schedule(
        self,
        topic: str,
        value: bytes,
        at: int | None = None,
        delay_ms: int | None = None,
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
        timer_id: str | None = None,
    ) -> str: ...

    def schedule_many(self, specs: Sequence[TimerSpec]) -> list[str]: ...

    def cancel_timer(self, timer_id: str) -> bool: ...

    def timer(self, timer_id: str) -> TimerInfo | None: ...

    def message_attempts(self, webhook_id: str) -> list[MessageAttempts]: ...

    def list_timers(
        self,
        topic: str | None = None,
        due_from_ms: int | None = None,
        due_to_ms: int | None = None,
        after: str | None = None,
        limit: int = limits.timers_page_default,
    ) -> TimerPage: ...

    def create_endpoint(
        self,
        name: str,
        url: str | None = None,
        topics: Sequence[str] | None = None,
        *,
        secret: str | None = None,
        headers: dict[str, str] | None = None,
        timeout_ms: int | None = None,
        max_in_flight: int | None = None,
        rate_limit_per_s: int | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | dict[str, Any] | None = None,
        expire_after_ms: int | None = None,
        disable_after_ms: int | None = None,
        ordering: str | None = None,
        enabled: bool | None = None,
        start: str | None = None,
        tenant: str | None = None,
        event_types: Sequence[str] | None = None,
        signature: str | None = None,
    ) -> EndpointInfo: ...

    def endpoints(self) -> list[EndpointInfo]: ...

    def endpoint(self, name: str) -> EndpointApi: ...

    def delete_endpoint(self, name: str) -> None: ...

    def portal_link(self, tenant: str, ttl_s: int = limits.portal_ttl_s_default) -> PortalLink: ...

    def put_event_type(
        self, name: str, description: str | None = None, schema: dict[str, Any] | None = None
    ) -> EventTypeInfo: ...

    def event_types(self) -> list[EventTypeInfo]: ...

    def event_type(self, name: str) -> EventTypeInfo: ...

    def delete_event_type(self, name: str) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> BrokerApi: ...

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...
