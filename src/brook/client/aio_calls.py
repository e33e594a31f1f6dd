"""The async client's calls of the operations the table serves generically, made by
scripts/client_calls.py from brook/operations/ and brook/api.py: change the row or the
Protocol, never this file, then run `make generate`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from brook import limits
from brook.client import protocol
from brook.models import (
    Attempt,
    Backoff,
    DeadRecord,
    DeliveryStats,
    EndpointInfo,
    ErrorGroup,
    EventTypeInfo,
    LakeStatus,
    MessageAttempts,
    PortalLink,
    Resent,
    ScheduleInfo,
    TestResult,
    TimerPage,
    TopicInfo,
    Transition,
    UniqueAck,
)

if TYPE_CHECKING:
    from brook.client.aio import AsyncBroker
    from brook.client.aio_handles import AsyncEndpoint, AsyncQueue


class AsyncBrokerCalls:
    """What AsyncBroker calls through the table's generic operations."""

    async def topics(self: AsyncBroker) -> list[TopicInfo]:
        """List topics (those a key limited to some covers)."""
        return await self._ask(list[TopicInfo], "list_topics")

    async def create_topic(
        self: AsyncBroker,
        name: str,
        partitions: int = 1,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        compaction: bool = False,
        lake: bool | None = None,
        value_schema: dict[str, Any] | None = None,
    ) -> TopicInfo:
        """Create a topic (the same settings again is a no-op)."""
        return await self._ask(
            TopicInfo,
            "create_topic",
            name,
            partitions=partitions,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            compaction=compaction,
            lake=lake,
            value_schema=value_schema,
        )

    async def delete_topic(self: AsyncBroker, name: str) -> None:
        """Delete a topic."""
        await self._do(protocol.request("delete_topic", name))

    async def lake_status(self: AsyncBroker, topic: str | None = None) -> list[LakeStatus]:
        """Where the lake stands: each topic's Parquet files, and per partition how far they
        reach and how long the oldest record not in them has waited."""
        return await self._ask(list[LakeStatus], "lake_status", topic=topic)

    async def lake_sync(self: AsyncBroker, topic: str | None = None) -> list[LakeStatus]:
        """Write every acknowledged record not yet in the lake (of one topic, or all) as Parquet;
        answers once it is durable (needs a broker serving with --lake)."""
        return await self._ask(list[LakeStatus], "lake_sync", topic=topic)

    async def list_timers(
        self: AsyncBroker,
        topic: str | None = None,
        due_from_ms: int | None = None,
        due_to_ms: int | None = None,
        after: str | None = None,
        limit: int = limits.timers_page_default,
    ) -> TimerPage:
        """Pending timers in order of due time (then id), a page at a time."""
        return await self._ask(
            TimerPage,
            "list_timers",
            topic=topic,
            due_from_ms=due_from_ms,
            due_to_ms=due_to_ms,
            after=after,
            limit=limit,
        )

    async def list_schedules(self: AsyncBroker) -> list[ScheduleInfo]:
        """List periodic schedules."""
        return await self._ask(list[ScheduleInfo], "list_schedules")

    async def put_schedule(
        self: AsyncBroker,
        name: str,
        topic: str,
        value: bytes = b"",
        cron: str | None = None,
        every_ms: int | None = None,
        tz: str = "UTC",
        missed: str = "skip",
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
    ) -> ScheduleInfo:
        """Create a periodic schedule or replace its definition (a new timing arms it from now)."""
        return await self._ask(
            ScheduleInfo,
            "put_schedule",
            name,
            topic=topic,
            value=value,
            cron=cron,
            every_ms=every_ms,
            tz=tz,
            missed=missed,
            key=key,
            headers=headers,
        )

    async def get_schedule(self: AsyncBroker, name: str) -> ScheduleInfo:
        """A periodic schedule."""
        return await self._ask(ScheduleInfo, "describe_schedule", name)

    async def pause_schedule(self: AsyncBroker, name: str) -> ScheduleInfo:
        """Fire no slot until resumed."""
        return await self._ask(ScheduleInfo, "pause_schedule", name)

    async def resume_schedule(self: AsyncBroker, name: str) -> ScheduleInfo:
        """Fire again from the next slot after now."""
        return await self._ask(ScheduleInfo, "resume_schedule", name)

    async def portal_link(
        self: AsyncBroker, tenant: str, ttl_s: int = limits.portal_ttl_s_default
    ) -> PortalLink:
        """A short-lived link to the dashboard that shows one tenant its own endpoints (attempts,
        test, replay, resend, a new secret, disable, enable) and nothing else."""
        return await self._ask(PortalLink, "portal_link", tenant=tenant, ttl_s=ttl_s)

    async def event_types(self: AsyncBroker) -> list[EventTypeInfo]:
        """The event-type catalog: each type, what it means and a JSON Schema of its bodies."""
        return await self._ask(list[EventTypeInfo], "list_event_types")

    async def put_event_type(
        self: AsyncBroker,
        name: str,
        description: str | None = None,
        schema: dict[str, Any] | None = None,
    ) -> EventTypeInfo:
        """Add an event type to the catalog, or change its description or schema (documentation
        for receivers: appends are not checked against the schema)."""
        return await self._ask(
            EventTypeInfo, "put_event_type", name, description=description, schema=schema
        )

    async def event_type(self: AsyncBroker, name: str) -> EventTypeInfo:
        """One event type."""
        return await self._ask(EventTypeInfo, "describe_event_type", name)

    async def delete_event_type(self: AsyncBroker, name: str) -> None:
        """Remove an event type from the catalog (records carrying it are not touched)."""
        await self._do(protocol.request("delete_event_type", name))

    async def endpoints(self: AsyncBroker) -> list[EndpointInfo]:
        """List delivery endpoints (no secrets)."""
        return await self._ask(list[EndpointInfo], "list_endpoints")

    async def create_endpoint(
        self: AsyncBroker,
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
    ) -> EndpointInfo:
        """Create a delivery endpoint (url and topics needed) or change its settings; the answer
        shows a secret made or given, once."""
        return await self._ask(
            EndpointInfo,
            "put_endpoint",
            name,
            url=url,
            topics=topics,
            secret=secret,
            headers=headers,
            timeout_ms=timeout_ms,
            max_in_flight=max_in_flight,
            rate_limit_per_s=rate_limit_per_s,
            max_attempts=max_attempts,
            backoff=backoff,
            expire_after_ms=expire_after_ms,
            disable_after_ms=disable_after_ms,
            ordering=ordering,
            enabled=enabled,
            start=start,
            tenant=tenant,
            event_types=event_types,
            signature=signature,
        )

    async def delete_endpoint(self: AsyncBroker, name: str) -> None:
        """Delete an endpoint and its queue groups."""
        await self._do(protocol.request("delete_endpoint", name))

    async def message_attempts(self: AsyncBroker, webhook_id: str) -> list[MessageAttempts]:
        """Every endpoint's attempts to deliver one message, by its webhook-id."""
        return await self._ask(list[MessageAttempts], "message_attempts", webhook_id)


class AsyncQueueCalls:
    """What AsyncQueue calls through the table's generic operations."""

    async def trace(self: AsyncQueue, partition: int, offset: int) -> list[Transition]:
        """A record's transitions in the status log."""
        return await self._broker._ask(
            list[Transition], "trace", self.topic, self.group, partition=partition, offset=offset
        )

    async def cancel(
        self: AsyncQueue,
        records: Iterable[tuple[int, int]] | None = None,
        key: bytes | str | None = None,
        reason: str = "",
    ) -> list[tuple[int, int]]:
        """Cancel waiting records (those named in records, or every one of key): each that is
        ready, delayed or waiting to retry is dead at once with the reason, never delivered
        again unless redriven; leased and finished ones are left; idempotent."""
        return await self._broker._ask(
            list[tuple[int, int]],
            "cancel_records",
            self.topic,
            self.group,
            records=records,
            key=key,
            reason=reason,
        )

    async def enqueue_unique(
        self: AsyncQueue,
        identity: str,
        value: bytes,
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
        replace: bool = False,
    ) -> UniqueAck:
        """Append a record unless a live record (waiting, delayed, retrying or leased) of its
        identity is in the group: then nothing is appended and that one is answered
        (existing). With replace (debounce), waiting ones are cancelled instead and the record
        appended. Safe to resend without replace."""
        return await self._broker._ask(
            UniqueAck,
            "enqueue_unique",
            self.topic,
            self.group,
            identity=identity,
            value=value,
            key=key,
            headers=headers,
            replace=replace,
        )

    async def redrive(
        self: AsyncQueue, limit: int | None = None, records: Iterable[tuple[int, int]] | None = None
    ) -> int:
        """Put dead records back to work (all, those named in records, or up to limit); records
        that are not dead are left as they are; idempotent."""
        return await self._broker._ask(
            int, "redrive_queue", self.topic, self.group, limit=limit, records=records
        )

    async def dead_errors(self: AsyncQueue) -> list[ErrorGroup]:
        """The errors the group's dead records died of, grouped (by exception type and the task's
        innermost frame, or by the reason with its ids masked), most first: how many are dead,
        and one whole error of each."""
        return await self._broker._ask(list[ErrorGroup], "dead_errors", self.topic, self.group)

    async def dead_records(
        self: AsyncQueue,
        error: str,
        after: tuple[int, int] | None = None,
        limit: int = limits.dead_records_page_default,
    ) -> list[DeadRecord]:
        """The dead records of one error group, in order of their place (partition, offset), a
        page at a time (pass the page's last as after)."""
        return await self._broker._ask(
            list[DeadRecord],
            "dead_records",
            self.topic,
            self.group,
            error=error,
            after=after,
            limit=limit,
        )


class AsyncEndpointCalls:
    """What AsyncEndpoint calls through the table's generic operations."""

    async def info(self: AsyncEndpoint) -> EndpointInfo:
        """An endpoint's settings."""
        return await self._broker._ask(EndpointInfo, "describe_endpoint", self.name)

    async def stats(self: AsyncEndpoint) -> DeliveryStats:
        """Records by state, in flight, breaker, success rate, latency."""
        return await self._broker._ask(DeliveryStats, "endpoint_stats", self.name)

    async def attempts(
        self: AsyncEndpoint, topic: str, partition: int, offset: int
    ) -> list[Attempt]:
        """Every attempt to deliver one record."""
        return await self._broker._ask(
            list[Attempt],
            "endpoint_attempts",
            self.name,
            topic=topic,
            partition=partition,
            offset=offset,
        )

    async def dead_errors(self: AsyncEndpoint, topic: str | None = None) -> list[ErrorGroup]:
        """What the endpoint's dead records died of (from one topic, or all), grouped as a queue
        group's are (by the reason with its ids masked), most first: how many are dead, and
        one whole reason of each."""
        return await self._broker._ask(list[ErrorGroup], "endpoint_errors", self.name, topic=topic)

    async def redrive(
        self: AsyncEndpoint,
        topic: str | None = None,
        limit: int | None = None,
        records: Iterable[tuple[int, int]] | None = None,
    ) -> int:
        """Put dead records back to work (of one topic or all, up to limit, or those named)."""
        return await self._broker._ask(
            int, "redrive_endpoint", self.name, topic=topic, limit=limit, records=records
        )

    async def resend(self: AsyncEndpoint, webhook_id: str) -> Resent:
        """Send one message to the endpoint once more, by its webhook-id (Brook's
        topic:partition:offset, or the record's brook.event-id), whether it was delivered,
        dead or still on its way; the receiver gets the same webhook-id."""
        return await self._broker._ask(Resent, "resend_message", self.name, webhook_id=webhook_id)

    async def replay(
        self: AsyncEndpoint,
        topic: str | None = None,
        since_ms: int | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> int:
        """Send again records already delivered (or appended before the endpoint began: a
        backfill): those appended from since_ms on (of one topic or all), or those of topic
        from offset on (of one partition or each); records not yet delivered are left as they
        are."""
        return await self._broker._ask(
            int,
            "replay_endpoint",
            self.name,
            topic=topic,
            since_ms=since_ms,
            partition=partition,
            offset=offset,
        )

    async def enable(self: AsyncEndpoint) -> EndpointInfo:
        """Deliver again."""
        return await self._broker._ask(EndpointInfo, "enable_endpoint", self.name)

    async def disable(self: AsyncEndpoint) -> EndpointInfo:
        """Stop delivering; records wait."""
        return await self._broker._ask(EndpointInfo, "disable_endpoint", self.name)

    async def test(self: AsyncEndpoint) -> TestResult:
        """Send a signed test request now and tell how it went."""
        return await self._broker._ask(TestResult, "test_endpoint", self.name)

    async def rotate_secret(self: AsyncEndpoint, secret: str | None = None) -> str:
        """A new secret (made, or the one given); the old one signs too for a day."""
        return await self._broker._ask(str, "rotate_secret", self.name, secret=secret)
