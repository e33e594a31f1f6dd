"""The JSON shapes of delivery endpoints, event types and the portal (docs/PROTOCOL.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from brook import limits, validate
from brook.event_headers import EVENT_TYPE_OR_GLOB_PATTERN
from brook.models import Outcome
from brook.names import (
    HEADER_PATTERN,
    SECRET_PATTERN,
    TOPIC_OR_GLOB_PATTERN,
    URL_PATTERN,
    USER_NAME_PATTERN,
    Name,
)
from brook.records import (
    Attempt,
    EndpointInfo,
    EventTypeInfo,
    MessageAttempts,
    TestResult,
)
from brook.wire.core import Count, In, Out, Positive, given_fields, request, text_of
from brook.wire.queues import BackoffIn, OutcomeOut, PositionIn, positions_in

# ---------------------------------------------------------------- delivery endpoints


Secret = Annotated[
    str,
    Meta(
        max_length=limits.endpoint_secret_chars_max, extra_json_schema={"pattern": SECRET_PATTERN}
    ),
]
"""An endpoint's secret (delivery/signing.py checks it, with its message)."""
HeaderValue = Annotated[
    str,
    Meta(
        extra_json_schema={
            "maxLength": limits.endpoint_header_chars_max,
            "pattern": "^[^\\r\\n\\u0000]*$",
        }
    ),
]
"""An endpoint's static header value (delivery/endpoint.py checks it, with its message)."""


class EndpointIn(In):
    """PUT /v1/endpoints/{endpoint}: create (url and topics needed) or change the
    settings given; null or absent keeps a setting."""

    url: (
        Annotated[
            str,
            Meta(
                min_length=1,
                max_length=limits.endpoint_url_chars_max,
                extra_json_schema={"pattern": URL_PATTERN},
            ),
        ]
        | None
    ) = None
    topics: (
        Annotated[
            list[Annotated[str, Meta(extra_json_schema={"pattern": TOPIC_OR_GLOB_PATTERN})]],
            Meta(min_length=1, max_length=limits.endpoint_topics_max),
        ]
        | None
    ) = None
    secret: Secret | None = None
    headers: (
        Annotated[
            dict[str, HeaderValue],
            Meta(
                extra_json_schema={
                    "maxProperties": limits.endpoint_headers_max,
                    "propertyNames": {"pattern": HEADER_PATTERN},
                }
            ),
        ]
        | None
    ) = None
    timeout_ms: (
        Annotated[int, Meta(ge=limits.endpoint_timeout_ms_min, le=limits.endpoint_timeout_ms_max)]
        | None
    ) = None
    max_in_flight: Annotated[int, Meta(ge=1, le=limits.endpoint_in_flight_max)] | None = None
    rate_limit_per_s: Annotated[int, Meta(ge=1, le=limits.endpoint_rate_per_s_max)] | None = None
    max_attempts: Annotated[int, Meta(ge=1, le=limits.queue_attempts_max)] | None = None
    backoff: BackoffIn | None = None
    expire_after_ms: Count | None = None
    """0: records never expire."""
    disable_after_ms: Count | None = None
    """0: never disabled for failing."""
    ordering: Literal["none", "key"] | None = None
    enabled: bool | None = None
    start: Literal["latest", "earliest"] | None = None
    tenant: Annotated[str, Meta(extra_json_schema={"pattern": USER_NAME_PATTERN})] | None = None
    """The customer the endpoint belongs to (SPEC §11); a key naming a tenant sets its own."""
    event_types: (
        Annotated[
            list[
                Annotated[
                    str,
                    Meta(
                        min_length=1,
                        max_length=limits.event_type_chars_max,
                        extra_json_schema={"pattern": EVENT_TYPE_OR_GLOB_PATTERN},
                    ),
                ]
            ],
            Meta(max_length=limits.endpoint_topics_max),
        ]
        | None
    ) = None
    """Only records of these event types (brook.event-type; names or globs); [] takes all."""
    signature: Literal["v1", "v1a"] | None = None
    """The secrets Brook makes: v1 (HMAC, whsec_) or v1a (Ed25519, whsk_)."""

    @classmethod
    def of_arguments(cls, **arguments: Any) -> EndpointIn:
        given = {k: v for k, v in arguments.items() if v is not None}
        if isinstance(given.get("backoff"), msgspec.Struct):
            given["backoff"] = msgspec.structs.asdict(given["backoff"])
        for listed in ("topics", "event_types"):
            if listed in given and not isinstance(given[listed], str):
                given[listed] = list(given[listed])
        return request(cls, **given)

    def resend_safe(self) -> bool | None:
        """The same settings again change nothing when they carry the secret (one made
        by a first try would be replaced by the second's)."""
        return True if self.secret is not None else None

    def given(self) -> dict[str, Any]:
        fields = given_fields(self)
        if self.backoff is not None:
            fields["backoff"] = given_fields(self.backoff)
        return fields


class EventTypeIn(In):
    """An event type of the catalog: what it means, and a JSON Schema of its bodies."""

    description: Annotated[str, Meta(max_length=limits.event_type_description_chars_max)] | None = (
        None
    )
    schema: dict[str, Any] | None = None


class PortalIn(In):
    """A portal link for one tenant, good for ttl_s seconds."""

    tenant: Annotated[str, Meta(extra_json_schema={"pattern": USER_NAME_PATTERN})]
    ttl_s: Annotated[int, Meta(ge=limits.portal_ttl_s_min, le=limits.portal_ttl_s_max)] | None = (
        None
    )

    @classmethod
    def of_arguments(cls, **arguments: Any) -> PortalIn:
        tenant = validate.tenant(arguments.get("tenant"))
        return request(cls, tenant=tenant, ttl_s=arguments.get("ttl_s"))


class EventTypes(Out):
    event_types: list[EventTypeInfo]
    """records.EventTypeInfo is the answer's shape itself (as EndpointInfo is)."""

    @classmethod
    def of(cls, infos: list[EventTypeInfo]) -> EventTypes:
        return cls(event_types=infos)

    def returned(self) -> list[EventTypeInfo]:
        return self.event_types


class Endpoints(Out):
    endpoints: list[EndpointInfo]
    """records.EndpointInfo is the answer's shape itself (as Published is)."""

    def returned(self) -> list[EndpointInfo]:
        return self.endpoints


class AttemptOut(Out):
    attempt: int
    at_ms: int
    state: Literal["acked", "retrying", "dead"]
    status: int | None
    latency_ms: float
    error: str
    reason: str
    excerpt_b64: bytes
    excerpt: str | None = None

    @classmethod
    def of(cls, attempt: Attempt) -> AttemptOut:
        fields = msgspec.structs.asdict(attempt)
        excerpt = fields.pop("excerpt")
        return cls(**fields, excerpt_b64=excerpt, excerpt=text_of(excerpt))

    def returned(self) -> Attempt:
        return Attempt(
            attempt=self.attempt,
            at_ms=self.at_ms,
            state=self.state,
            status=self.status,
            latency_ms=self.latency_ms,
            error=self.error,
            reason=self.reason,
            excerpt=self.excerpt_b64,
        )


class Attempts(Out):
    attempts: list[AttemptOut]

    @classmethod
    def of(cls, attempts: list[Attempt]) -> Attempts:
        return cls(attempts=[AttemptOut.of(a) for a in attempts])

    def returned(self) -> list[Attempt]:
        return [a.returned() for a in self.attempts]


class EndpointAttemptsOut(Out):
    endpoint: str
    attempts: list[AttemptOut]


class MessageAttemptsOut(Out):
    endpoints: list[EndpointAttemptsOut]
    """Each endpoint that tried to deliver the message, with its attempts, oldest first."""

    def returned(self) -> list[MessageAttempts]:
        return [
            MessageAttempts(endpoint=e.endpoint, attempts=[a.returned() for a in e.attempts])
            for e in self.endpoints
        ]


class ResendIn(In):
    """One message sent again: Brook's webhook-id (topic:partition:offset) or the
    sender's event id the record carried."""

    webhook_id: Annotated[str, Meta(min_length=1, max_length=limits.event_id_chars_max)]

    @classmethod
    def of_arguments(cls, **arguments: Any) -> ResendIn:
        return cls(webhook_id=validate.webhook_id(arguments.get("webhook_id")))


class EndpointRedriveIn(In):
    """Dead records back to work: of one topic or all, up to limit, or those named."""

    topic: Name | None = None
    limit: Positive | None = None
    records: Annotated[list[PositionIn], Meta(max_length=limits.redrive_records_max)] | None = None

    def positions(self) -> list[tuple[int, int]] | None:
        if self.records is None:
            return None
        return [(p.partition, p.offset) for p in self.records]

    def arguments(self) -> dict[str, Any]:
        return {"topic": self.topic, "limit": self.limit, "records": self.positions()}

    @classmethod
    def of_arguments(cls, **arguments: Any) -> EndpointRedriveIn:
        topic = arguments.get("topic")
        return request(
            cls,
            topic=None if topic is None else validate.topic_name(topic),
            limit=arguments.get("limit"),
            records=positions_in(arguments),
        )


class EndpointReplayIn(In):
    """Records already delivered sent again: from a time, or from an offset of one topic."""

    topic: Name | None = None
    since_ms: Count | None = None
    partition: Count | None = None
    offset: Count | None = None

    @classmethod
    def of_arguments(cls, **arguments: Any) -> EndpointReplayIn:
        topic = arguments.get("topic")
        since_ms, partition, offset = validate.replay_from(
            topic, arguments.get("since_ms"), arguments.get("partition"), arguments.get("offset")
        )
        return request(
            cls,
            topic=None if topic is None else validate.topic_name(topic),
            since_ms=since_ms,
            partition=partition,
            offset=offset,
        )


class Replayed(Out):
    replayed: Count
    """How many records go again."""

    @classmethod
    def of(cls, count: int) -> Replayed:
        return cls(replayed=count)

    def returned(self) -> int:
        return self.replayed


class TestOut(OutcomeOut):
    """A test request's outcome: the shape of an attempt's (OutcomeOut)."""

    __test__ = False

    @classmethod
    def of(cls, outcome: Outcome | TestResult) -> TestOut:
        return cls(**msgspec.structs.asdict(OutcomeOut.of(outcome)))

    def returned(self) -> TestResult:
        return TestResult(
            status=self.status,
            latency_ms=self.latency_ms,
            error=self.error,
            excerpt=self.excerpt_b64,
        )


class RotateIn(In):
    secret: Secret | None = None


class Rotated(Out):
    secret: str

    @classmethod
    def of(cls, secret: str) -> Rotated:
        return cls(secret=secret)

    def returned(self) -> str:
        return self.secret
