# Made from client/aio_calls.py by scripts/unasync.py: run `make generate` after changing that.
"""The sync client's calls of the operations the table serves generically, made by
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
    from brook.client.sync import RemoteBroker
    from brook.client.sync_handles import RemoteEndpoint, RemoteQueue


class RemoteBrokerCalls:
    """What RemoteBroker calls through the table's generic operations."""

    def topics(self: RemoteBroker) -> list[TopicInfo]:
        """List topics (those a key limited to some covers)."""
        return self._ask(list[TopicInfo], "list_topics")

    def create_topic(
        self: RemoteBroker,
        name: str,
        partitions: int = 1,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        compaction: bool = False,
        lake: bool | None = None,
        value_schema: dict[str, Any] | None = None,
    ) -> TopicInfo:
        """Create a topic (the same settings again is a no-op)."""
        return self._ask(
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

    def delete_topic(self: RemoteBroker, name: str) -> None:
        """Delete a topic."""
        self._do(protocol.request("delete_topic", name))

    def lake_status(self: RemoteBroker, topic: str | None = None) -> list[LakeStatus]:
        """Where the lake stands: each topic's Parquet files, and per partition how far they
        reach and how long the oldest record not in them has waited."""
        return self._ask(list[LakeStatus], "lake_status", topic=topic)

    def lake_sync(self: RemoteBroker, topic: str | None = None) -> list[LakeStatus]:
        """Write every acknowledged record not yet in the lake (of one topic, or all) as Parquet;
        answers once it is durable (needs a broker serving with --lake)."""
        return self._ask(list[LakeStatus], "lake_sync", topic=topic)

    def list_timers(
        self: RemoteBroker,
        topic: str | None = None,
        due_from_ms: int | None = None,
        due_to_ms: int | None = None,
        after: str | None = None,
        limit: int = limits.timers_page_default,
    ) -> TimerPage:
        """Pending timers in order of due time (then id), a page at a time."""
        return self._ask(
            TimerPage,
            "list_timers",
            topic=topic,
            due_from_ms=due_from_ms,
            due_to_ms=due_to_ms,
            after=after,
            limit=limit,
        )

    def list_schedules(self: RemoteBroker) -> list[ScheduleInfo]:
        """List periodic schedules."""
        return self._ask(list[ScheduleInfo], "list_schedules")

    def put_schedule(
        self: RemoteBroker,
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
        return self._ask(
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

    def get_schedule(self: RemoteBroker, name: str) -> ScheduleInfo:
        """A periodic schedule."""
        return self._ask(ScheduleInfo, "describe_schedule", name)

    def pause_schedule(self: RemoteBroker, name: str) -> ScheduleInfo:
        """Fire no slot until resumed."""
        return self._ask(ScheduleInfo, "pause_schedule", name)

    def resume_schedule(self: RemoteBroker, name: str) -> ScheduleInfo:
        """Fire again from the next slot after now."""
        return self._ask(ScheduleInfo, "resume_schedule", name)

    def portal_link(
        self: RemoteBroker, tenant: str, ttl_s: int = limits.portal_ttl_s_default
    ) -> PortalLink:
        """A short-lived link to the dashboard that shows one tenant its own endpoints (attempts,
        test, replay, resend, a new secret, disable, enable) and nothing else."""
        return self._ask(PortalLink, "portal_link", tenant=tenant, ttl_s=ttl_s)

    def event_types(self: RemoteBroker) -> list[EventTypeInfo]:
        """The event-type catalog: each type, what it means and a JSON Schema of its bodies."""
        return self._ask(list[EventTypeInfo], "list_event_types")

    def put_event_type(
        self: RemoteBroker,
        name: str,
        description: str | None = None,
        schema: dict[str, Any] | None = None,
    ) -> EventTypeInfo:
        """Add an event type to the catalog, or change its description or schema (documentation
        for receivers: appends are not checked against the schema)."""
        return self._ask(
            EventTypeInfo, "put_event_type", name, description=description, schema=schema
        )

    def event_type(self: RemoteBroker, name: str) -> EventTypeInfo:
        """One event type."""
        return self._ask(EventTypeInfo, "describe_event_type", name)

    def delete_event_type(self: RemoteBroker, name: str) -> None:
        """Remove an event type from the catalog (records carrying it are not touched)."""
        self._do(protocol.request("delete_event_type", name))

    def endpoints(self: RemoteBroker) -> list[EndpointInfo]:
        """List delivery endpoints (no secrets)."""
        return self._ask(list[EndpointInfo], "list_endpoints")

    def create_endpoint(
        self: RemoteBroker,
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
        return self._ask(
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

    def delete_endpoint(self: RemoteBroker, name: str) -> None:
        """Delete an endpoint and its queue groups."""
        self._do(protocol.request("delete_endpoint", name))

    def message_attempts(self: RemoteBroker, webhook_id: str) -> list[MessageAttempts]:
        """Every endpoint's attempts to deliver one message, by its webhook-id."""
        return self._ask(list[MessageAttempts], "message_attempts", webhook_id)


class RemoteQueueCalls:
    """What RemoteQueue calls through the table's generic operations."""

    def trace(self: RemoteQueue, partition: int, offset: int) -> list[Transition]:
        """A record's transitions in the status log."""
        return self._broker._ask(
            list[Transition], "trace", self.topic, self.group, partition=partition, offset=offset
        )

    def cancel(
        self: RemoteQueue,
        records: Iterable[tuple[int, int]] | None = None,
        key: bytes | str | None = None,
        reason: str = "",
    ) -> list[tuple[int, int]]:
        """Cancel waiting records (those named in records, or every one of key): each that is
        ready, delayed or waiting to retry is dead at once with the reason, never delivered
        again unless redriven; leased and finished ones are left; idempotent."""
        return self._broker._ask(
            list[tuple[int, int]],
            "cancel_records",
            self.topic,
            self.group,
            records=records,
            key=key,
            reason=reason,
        )

    def enqueue_unique(
        self: RemoteQueue,
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
        return self._broker._ask(
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

    def redrive(
        self: RemoteQueue,
        limit: int | None = None,
        records: Iterable[tuple[int, int]] | None = None,
    ) -> int:
        """Put dead records back to work (all, those named in records, or up to limit); records
        that are not dead are left as they are; idempotent."""
        return self._broker._ask(
            int, "redrive_queue", self.topic, self.group, limit=limit, records=records
        )

    def dead_errors(self: RemoteQueue) -> list[ErrorGroup]:
        """The errors the group's dead records died of, grouped (by exception type and the task's
        innermost frame, or by the reason with its ids masked), most first: how many are dead,
        and one whole error of each."""
        return self._broker._ask(list[ErrorGroup], "dead_errors", self.topic, self.group)

    def dead_records(
        self: RemoteQueue,
        error: str,
        after: tuple[int, int] | None = None,
        limit: int = limits.dead_records_page_default,
    ) -> list[DeadRecord]:
        """The dead records of one error group, in order of their place (partition, offset), a
        page at a time (pass the page's last as after)."""
        return self._broker._ask(
            list[DeadRecord],
            "dead_records",
            self.topic,
            self.group,
            error=error,
            after=after,
            limit=limit,
        )


class RemoteEndpointCalls:
    """What RemoteEndpoint calls through the table's generic operations."""

    def info(self: RemoteEndpoint) -> EndpointInfo:
        """An endpoint's settings."""
        return self._broker._ask(EndpointInfo, "describe_endpoint", self.name)

    def stats(self: RemoteEndpoint) -> DeliveryStats:
        """Records by state, in flight, breaker, success rate, latency."""
        return self._broker._ask(DeliveryStats, "endpoint_stats", self.name)

    def attempts(self: RemoteEndpoint, topic: str, partition: int, offset: int) -> list[Attempt]:
        """Every attempt to deliver one record."""
        return self._broker._ask(
            list[Attempt],
            "endpoint_attempts",
            self.name,
            topic=topic,
            partition=partition,
            offset=offset,
        )

    def dead_errors(self: RemoteEndpoint, topic: str | None = None) -> list[ErrorGroup]:
        """What the endpoint's dead records died of (from one topic, or all), grouped as a queue
        group's are (by the reason with its ids masked), most first: how many are dead, and
        one whole reason of each."""
        return self._broker._ask(list[ErrorGroup], "endpoint_errors", self.name, topic=topic)

    def redrive(
        self: RemoteEndpoint,
        topic: str | None = None,
        limit: int | None = None,
        records: Iterable[tuple[int, int]] | None = None,
    ) -> int:
        """Put dead records back to work (of one topic or all, up to limit, or those named)."""
        return self._broker._ask(
            int, "redrive_endpoint", self.name, topic=topic, limit=limit, records=records
        )

    def resend(self: RemoteEndpoint, webhook_id: str) -> Resent:
        """Send one message to the endpoint once more, by its webhook-id (Brook's
        topic:partition:offset, or the record's brook.event-id), whether it was delivered,
        dead or still on its way; the receiver gets the same webhook-id."""
        return self._broker._ask(Resent, "resend_message", self.name, webhook_id=webhook_id)

    def replay(
        self: RemoteEndpoint,
        topic: str | None = None,
        since_ms: int | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> int:
        """Send again records already delivered (or appended before the endpoint began: a
        backfill): those appended from since_ms on (of one topic or all), or those of topic
        from offset on (of one partition or each); records not yet delivered are left as they
        are."""
        return self._broker._ask(
            int,
            "replay_endpoint",
            self.name,
            topic=topic,
            since_ms=since_ms,
            partition=partition,
            offset=offset,
        )

    def enable(self: RemoteEndpoint) -> EndpointInfo:
        """Deliver again."""
        return self._broker._ask(EndpointInfo, "enable_endpoint", self.name)

    def disable(self: RemoteEndpoint) -> EndpointInfo:
        """Stop delivering; records wait."""
        return self._broker._ask(EndpointInfo, "disable_endpoint", self.name)

    def test(self: RemoteEndpoint) -> TestResult:
        """Send a signed test request now and tell how it went."""
        return self._broker._ask(TestResult, "test_endpoint", self.name)

    def rotate_secret(self: RemoteEndpoint, secret: str | None = None) -> str:
        """A new secret (made, or the one given); the old one signs too for a day."""
        return self._broker._ask(str, "rotate_secret", self.name, secret=secret)
