"""`b.endpoint(name)`: look at an endpoint's delivery and act on it (SPEC §7).

The same methods exist on the remote clients' endpoints (brook.connect)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from brook import validate
from brook.delivery import endpoint as ep
from brook.delivery import messages, signing
from brook.errors import MessageNotFound, TopicNotFound
from brook.models import ErrorGroup, State
from brook.records import (
    Attempt,
    DeliveryCounters,
    DeliveryStats,
    EndpointInfo,
    Recent,
    Resent,
    TestResult,
)

if TYPE_CHECKING:
    from brook.delivery.service import Deliverer
    from brook.delivery.store import EndpointStore
    from brook.queue.shell import QueueGroup

_ENDED = {State.ACKED: "acked", State.RETRYING: "retrying", State.DEAD: "dead"}


def info(
    endpoint: ep.Endpoint, secret: str | None = None, warnings: list[str] | None = None
) -> EndpointInfo:
    """What the API tells of an endpoint; `secret` only when it was just made or given,
    `warnings` only in the answer to a change."""
    s = endpoint.settings
    return EndpointInfo(
        name=endpoint.name,
        url=s.url,
        topics=list(s.topics),
        headers=dict(s.headers),
        timeout_ms=s.timeout_ms,
        max_in_flight=s.max_in_flight,
        rate_limit_per_s=s.rate_limit_per_s,
        max_attempts=s.max_attempts,
        backoff=msgspec.to_builtins(s.backoff),
        expire_after_ms=s.expire_after_ms,
        disable_after_ms=s.disable_after_ms,
        ordering=s.ordering,
        enabled=s.enabled,
        start=s.start,
        disabled_reason=endpoint.disabled_reason,
        created_ms=endpoint.created_ms,
        secret=secret,
        tenant=s.tenant,
        event_types=None if s.event_types is None else list(s.event_types),
        signature=s.signature,
        public_key=signing.public_key(endpoint.secrets[0].value) if endpoint.secrets else None,
        warnings=warnings or [],
    )


class Endpoint:
    EMBEDDED_ONLY = frozenset({"counters", "recent"})
    """Figures kept in this process's memory, for /metrics and the dashboard."""

    def __init__(self, store: EndpointStore, deliverer: Deliverer, name: str) -> None:
        store.get(name)  # EndpointNotFound
        self._store = store
        self._deliverer = deliverer
        self.name = name

    def __repr__(self) -> str:
        return f"<Endpoint {self.name}>"

    def info(self) -> EndpointInfo:
        """Its settings (never its secret)."""
        return info(self._store.get(self.name))

    def stats(self) -> DeliveryStats:
        """Records by state over its topics, in flight, breaker, success rate, latency."""
        endpoint = self._store.get(self.name)
        counts = {"ready": 0, "leased": 0, "retrying": 0, "acked": 0, "dead": 0}
        dues = []
        for group in self._store.groups(endpoint):
            for state, count in group.stats().items():
                if state in counts:
                    counts[state] += count
            due = group.next_due_ms()
            if due is not None:
                dues.append(due)
        seen = self._deliverer.stats(self.name)
        next_attempt: int | None = None
        if endpoint.settings.enabled:
            if counts["ready"]:
                next_attempt = self._deliverer.core.now_ms()
            elif counts["retrying"] and dues:
                next_attempt = min(dues)
            probe = self._deliverer.next_probe_ms(self.name)
            if next_attempt is not None and probe is not None:
                next_attempt = max(next_attempt, probe)
        failing = self._deliverer.failing(self.name)
        return DeliveryStats(
            **counts,
            failing="; ".join(f"{f.task}: {f.error}" for f in failing),
            failing_since_ms=failing[0].since_ms if failing else None,
            in_flight=self._deliverer.in_flight(self.name),
            breaker=self._deliverer.breaker_state(self.name),
            success_rate=seen.success_rate(),
            latency_p50_ms=seen.latency_ms(0.5),
            latency_p99_ms=seen.latency_ms(0.99),
            attempts=dict(seen.attempts),
            last_error=seen.last_error,
            last_error_ms=seen.last_error_ms,
            next_attempt_ms=next_attempt,
        )

    def counters(self) -> DeliveryCounters:
        """Its counters since the broker started (what /metrics shows of it)."""
        endpoint = self._store.get(self.name)
        seen = self._deliverer.stats(self.name)
        backlog = 0
        for group in self._store.groups(endpoint):
            counts = group.counts()
            backlog += counts["ready"] + counts["leased"] + counts["retrying"]
        return DeliveryCounters(
            attempts=dict(seen.attempts),
            statuses=dict(seen.statuses),
            latency_s=seen.latency_histogram(),
            in_flight=self._deliverer.in_flight(self.name),
            breaker=self._deliverer.breaker_state(self.name),
            failing=bool(self._deliverer.failing(self.name)),
            backlog=backlog,
        )

    def recent(self) -> list[Recent]:
        """Its most recent attempts, newest first (kept in memory since the start)."""
        return self._deliverer.recent(self.name)

    def attempts(self, topic: str, partition: int, offset: int) -> list[Attempt]:
        """Every attempt to deliver the record, oldest first ([] if none yet)."""
        validate.topic_name(topic)
        group = self._group(topic)
        out = []
        for t in group.trace(
            validate.whole(partition, "partition"), validate.whole(offset, "offset")
        ):
            ended_by_time = t.state is State.DEAD and t.outcome is None  # expiry, lease lost
            if t.state not in _ENDED or (t.outcome is None and not ended_by_time):
                continue
            outcome = t.outcome
            out.append(
                Attempt(
                    attempt=t.attempt,
                    at_ms=t.at_ms,
                    state=_ENDED[t.state],
                    status=None if outcome is None else outcome.status,
                    latency_ms=0.0 if outcome is None else outcome.latency_ms,
                    error="" if outcome is None else outcome.error,
                    reason=t.reason,
                    excerpt=b"" if outcome is None else outcome.excerpt,
                )
            )
        return out

    def redrive(
        self,
        topic: str | None = None,
        limit: int | None = None,
        records: Iterable[tuple[int, int]] | None = None,
    ) -> int:
        """Put dead records back to work (of one topic, or of all), attempts counted
        afresh; up to `limit`, or those of `records` ((partition, offset) pairs of
        `topic`). Returns how many."""
        limit = validate.optional_whole(limit, "limit", 1)
        positions = validate.positions(records)
        if positions is not None and topic is None:
            validate.topic_name(topic)  # InvalidName: records name offsets of one topic
        done = 0
        for group in self._groups(topic):
            left = None if limit is None else limit - done
            if left is not None and left <= 0:
                break
            done += group.redrive(left, positions)
        if done:
            self._deliverer.wake(self.name)
        return done

    def replay(
        self,
        topic: str | None = None,
        since_ms: int | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> int:
        """Send again records already delivered: those appended at or after `since_ms`
        (of one topic, or of all the endpoint's), or those of `topic` from `offset` on
        (of one partition, or of each). Records appended before the endpoint began
        count as delivered (its start): a replay from before then sends them too, a
        backfill. Records not yet delivered are left as they are (they go anyway;
        dead ones go back with `redrive`). Same webhook-id as before, attempts counted
        afresh. Returns how many records go again."""
        since_ms, partition, offset = validate.replay_from(topic, since_ms, partition, offset)
        done = sum(group.replay(partition, offset, since_ms) for group in self._groups(topic))
        if done:
            self._deliverer.wake(self.name)
        return done

    def resend(self, webhook_id: str) -> Resent:
        """Send the message with this webhook-id (Brook's topic:partition:offset, or the
        record's brook.event-id) to this endpoint once more, whatever became of it:
        delivered, dead, or still on its way (then it just goes). The receiver gets the
        same webhook-id. MessageNotFound when none of the endpoint's topics holds it;
        for an event id carried by several records, the newest goes."""
        endpoint = self._store.get(self.name)
        topics = [g.topic for g in self._store.groups(endpoint)]
        found = messages.locate(self._deliverer.core, webhook_id, topics)
        if not found:
            raise MessageNotFound(
                f"endpoint {self.name} has no message {webhook_id[:80]!r}: "
                + messages.missing(webhook_id, topics)
            )
        topic, partition, offset = found[-1]
        state = self._group(topic).resend(partition, offset)
        if state != "pending":
            self._deliverer.wake(self.name)
        return Resent(
            webhook_id=webhook_id, topic=topic, partition=partition, offset=offset, state=state
        )

    def enable(self) -> EndpointInfo:
        """Deliver again (after a 410, or a disable)."""
        return info(self._store.set_enabled(self.name, True))

    def disable(self) -> EndpointInfo:
        """Stop delivering; records wait in their queue groups."""
        return info(self._store.set_enabled(self.name, False, "disabled by hand"))

    def rotate_secret(self, secret: str | None = None) -> str:
        """A new secret (or `secret`); requests are signed with the old one too for a
        day, so receivers can switch without losing a request."""
        return self._store.rotate_secret(self.name, secret)

    def test(self) -> TestResult:
        """Send a signed test request now (outside every queue) and tell how it went."""
        result = self._deliverer.test(self._store.get(self.name))
        return TestResult(
            status=result.status,
            latency_ms=round(result.latency_ms, 3),
            error="" if result.error is None else f"{result.error.value}: {result.error_message}",
            excerpt=result.excerpt,
        )

    def dead_errors(self, topic: str | None = None) -> list[ErrorGroup]:
        """What the endpoint's dead records died of (from `topic`, or from every topic it
        delivers), grouped as a queue group's are (queue/error_groups.py: the reason with
        its ids masked, so "HTTP 404" from a thousand records is one group), as
        ErrorGroup(group, dead, example), most first. EndpointNotFound; TopicNotFound when
        it delivers nothing from `topic`."""
        merged: dict[str, ErrorGroup] = {}
        for group in self._groups(topic):
            for found in group.dead_errors():
                seen = merged.get(found.group)
                merged[found.group] = (
                    found
                    if seen is None
                    else ErrorGroup(seen.group, seen.dead + found.dead, seen.example)
                )
        return sorted(merged.values(), key=lambda found: (-found.dead, found.group))

    def _groups(self, topic: str | None) -> list[QueueGroup]:
        """The queue groups of `topic` (one) or of every topic the endpoint delivers."""
        if topic is not None:
            return [self._group(validate.topic_name(topic))]
        return self._store.groups(self._store.get(self.name))

    def _group(self, topic: str) -> QueueGroup:
        endpoint = self._store.get(self.name)
        for group in self._store.groups(endpoint):
            if group.topic == topic:
                return group
        raise TopicNotFound(f"endpoint {self.name} delivers nothing from topic {topic}")
