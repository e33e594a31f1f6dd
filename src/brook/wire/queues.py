"""The JSON shapes of queue groups, unique records and joins (docs/PROTOCOL.md)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta

from brook import limits, validate
from brook.models import Outcome, State, Transition
from brook.names import (
    Id,
    Name,
    Receipt,
)
from brook.records import (
    JobInfo,
    JobStateName,
    JoinContinuation,
    JoinInfo,
    JoinMember,
    JoinSpec,
    TestResult,
    UniqueAck,
)
from brook.wire.core import (
    Count,
    In,
    Millis,
    Offset,
    Out,
    Positive,
    Reason,
    RecordFields,
    RecordOut,
    Visibility,
    given_fields,
    request,
    text_of,
)

# ---------------------------------------------------------------- queue groups


class BackoffIn(In):
    min_ms: Millis | None = None
    factor: Annotated[float, Meta(ge=1, le=limits.backoff_factor_max)] | None = None
    max_ms: Millis | None = None
    jitter: Annotated[float, Meta(ge=0, le=1)] | None = None


class QueueSettingsIn(In):
    """PUT /v1/topics/{topic}/queues/{group}: settings left out or null keep the stored ones."""

    visibility_timeout_ms: Visibility | None = None
    max_attempts: Annotated[int, Meta(ge=1, le=limits.queue_attempts_max)] | None = None
    ordering: Literal["none", "key"] | None = None
    dead_letter_topic: Name | None = None
    backoff: BackoffIn | None = None
    expire_after_ms: Count | None = None
    """0: records never expire."""
    concurrency_per_key: Annotated[int, Meta(ge=0, le=limits.queue_window_records_max)] | None = (
        None
    )
    """At most this many records of one key leased at once; 0 removes the limit."""
    key_rate_limit_per_s: Annotated[float, Meta(ge=0, le=limits.rate_per_s_max)] | None = None
    """At most this many leases a second per key; 0 removes the limit."""
    rate_limit_per_s: Annotated[float, Meta(ge=0, le=limits.rate_per_s_max)] | None = None
    """At most this many leases a second for the whole group; 0 removes the limit."""
    lower_priority_share: Annotated[float, Meta(ge=0, le=1)] | None = None
    """The share of leases lower priorities get while higher ones wait (0: strict)."""

    def given(self) -> dict[str, Any]:
        out = msgspec.structs.asdict(self)
        if self.backoff is not None:
            out["backoff"] = given_fields(self.backoff)
        return out


class BackoffOut(Out):
    min_ms: int
    factor: float
    max_ms: int
    jitter: float


class QueueSettingsOut(Out):
    visibility_timeout_ms: int
    max_attempts: int
    backoff: BackoffOut
    expire_after_ms: int | None
    ordering: str
    dead_letter_topic: str | None
    """Where dead records are copied; None when they stay in place (the broker's
    delivery groups on a dead-letter topic)."""
    copy_dead: bool = True
    concurrency_per_key: int | None = None
    key_rate_limit_per_s: float | None = None
    rate_limit_per_s: float | None = None
    lower_priority_share: float = 0.1


class QueueOut(Out):
    topic: str
    group: str
    settings: QueueSettingsOut
    stats: dict[str, int]
    """Records by state (ready, leased, retrying, dead; acked counts all ever acked)."""


class LeaseIn(In):
    max_records: Positive = limits.lease_records_default
    wait_ms: Millis = 0
    """Long-poll up to this long (capped at wait_ms_max)."""
    visibility_timeout_ms: Visibility | None = None


class JobOut(RecordOut, omit_defaults=True, kw_only=True):
    attempt: Positive
    receipt: str


class Jobs(Out):
    jobs: list[JobOut]


class SettleIn(In):
    """ack and discard (the reason is kept for discard)."""

    receipts: Annotated[list[Receipt], Meta(min_length=1)]
    reason: Reason = ""


class AckIn(SettleIn):
    results_b64: (
        list[Annotated[bytes, Meta(max_length=limits.job_result_bytes_max)] | None] | None
    ) = None
    """One per receipt (or null): what each job returned, kept for GET .../job."""


class JobInfoOut(Out, omit_defaults=True):
    partition: Count
    offset: Offset
    state: JobStateName
    attempt: Count = 0
    error: str = ""
    result_b64: bytes | None = None
    result: str | None = None
    acked_ms: int | None = None
    due_ms: int | None = None

    @classmethod
    def of(cls, info: JobInfo) -> JobInfoOut:
        result = info.result
        return cls(
            partition=info.partition,
            offset=info.offset,
            state=info.state,
            attempt=info.attempt,
            error=info.error,
            result_b64=result,
            result=None if result is None else text_of(result),
            acked_ms=info.acked_ms,
            due_ms=info.due_ms,
        )

    def info(self) -> JobInfo:
        return JobInfo(
            partition=self.partition,
            offset=self.offset,
            state=self.state,
            attempt=self.attempt,
            error=self.error,
            result=self.result_b64,
            acked_ms=self.acked_ms,
            due_ms=self.due_ms,
        )


class NackIn(SettleIn):
    """nack and release: the reason, and when the records are due again (nack: the
    group's backoff by default; release: at once)."""

    delay_ms: Annotated[int, Meta(ge=0, le=limits.visibility_timeout_ms_max)] | None = None


class ExtendIn(In):
    receipts: Annotated[list[Receipt], Meta(min_length=1)]
    ms: Visibility


class Settled(Out):
    settled: Count


class OutcomeOut(Out):
    """How an attempt went (delivery's attempts): the HTTP status or why there was
    none, how long it took, and the start of the answer."""

    status: int | None
    latency_ms: float
    error: str
    excerpt_b64: bytes
    excerpt: str | None = None

    @classmethod
    def of(cls, outcome: Outcome | TestResult) -> OutcomeOut:
        return cls(
            status=outcome.status,
            latency_ms=outcome.latency_ms,
            error=outcome.error,
            excerpt_b64=outcome.excerpt,
            excerpt=text_of(outcome.excerpt),
        )

    def outcome(self) -> Outcome:
        return Outcome(self.status, self.latency_ms, self.error, self.excerpt_b64)


class TransitionOut(Out):
    at_ms: int
    state: str
    attempt: int
    reason: str
    receipt: str | None
    until_ms: int
    outcome: OutcomeOut | None = None


class Trace(Out):
    transitions: list[TransitionOut]

    @classmethod
    def of(cls, transitions: list[Transition]) -> Trace:
        return cls(transitions=[_transition_out(t) for t in transitions])

    def returned(self) -> list[Transition]:
        return [
            Transition(
                t.at_ms,
                State(t.state),
                t.attempt,
                t.reason,
                t.receipt,
                t.until_ms,
                None if t.outcome is None else t.outcome.outcome(),
            )
            for t in self.transitions
        ]


def _transition_out(transition: Transition) -> TransitionOut:
    outcome = transition.outcome
    return TransitionOut(
        at_ms=transition.at_ms,
        state=transition.state.value,
        attempt=transition.attempt,
        reason=transition.reason,
        receipt=transition.receipt,
        until_ms=transition.until_ms,
        outcome=None if outcome is None else OutcomeOut.of(outcome),
    )


class PositionIn(In):
    partition: Count
    offset: Offset


class RedriveIn(In):
    """Redrive every dead record, those named, or up to `limit` of them."""

    limit: Positive | None = None
    records: Annotated[list[PositionIn], Meta(max_length=limits.redrive_records_max)] | None = None

    def positions(self) -> list[tuple[int, int]] | None:
        return None if self.records is None else [(r.partition, r.offset) for r in self.records]

    def arguments(self) -> dict[str, Any]:
        return {"limit": self.limit, "records": self.positions()}

    @classmethod
    def of_arguments(cls, **arguments: Any) -> RedriveIn:
        return request(cls, limit=arguments.get("limit"), records=positions_in(arguments))


def positions_in(arguments: dict[str, Any]) -> list[dict[str, int]] | None:
    """A call's `records` ((partition, offset) pairs) as a body's."""
    chosen = validate.positions(arguments.get("records"))  # checked as embedded calls are
    return None if chosen is None else [{"partition": p, "offset": o} for p, o in chosen]


class Redriven(Out):
    redriven: Count

    @classmethod
    def of(cls, count: int) -> Redriven:
        return cls(redriven=count)

    def returned(self) -> int:
        return self.redriven


class CancelIn(In):
    """Cancel the records named, or every waiting record of a key."""

    shape: ClassVar[str] = '{"records": [{"partition", "offset"}, ...]} or {"key": ...}'
    one_at_most: ClassVar[tuple[tuple[str, str], ...]] = (
        ("records", "key"),
        ("records", "key_b64"),
        ("key", "key_b64"),
    )
    one_at_least: ClassVar[tuple[tuple[str, ...], ...]] = (("records", "key", "key_b64"),)

    records: Annotated[list[PositionIn], Meta(max_length=limits.redrive_records_max)] | None = None
    key: str | None = None
    key_b64: bytes | None = None
    reason: Reason = ""

    def __post_init__(self) -> None:
        for first, second in self.one_at_most:
            if getattr(self, first) is not None and getattr(self, second) is not None:
                raise ValueError(f"give {first} or {second}, not both")
        if all(getattr(self, name) is None for name in self.one_at_least[0]):
            raise ValueError("name the records to cancel (records) or their key (key, key_b64)")

    def key_bytes(self) -> bytes | None:
        return self.key_b64 if self.key is None else self.key.encode()

    def positions(self) -> list[tuple[int, int]] | None:
        return None if self.records is None else [(r.partition, r.offset) for r in self.records]

    def arguments(self) -> dict[str, Any]:
        return {"records": self.positions(), "key": self.key_bytes(), "reason": self.reason}

    @classmethod
    def of_arguments(cls, **arguments: Any) -> CancelIn:
        chosen, key = validate.cancelled(arguments.get("records"), arguments.get("key"))
        return request(
            cls,
            records=None if chosen is None else [{"partition": p, "offset": o} for p, o in chosen],
            key_b64=key,
            reason=validate.reason(arguments.get("reason", "")),
        )


class PositionOut(Out):
    partition: int
    offset: int


class RecordsCancelled(Out):
    cancelled: list[PositionOut]
    """The records cancelled: those that were waiting (ready, delayed or retrying)."""

    @classmethod
    def of(cls, positions: list[tuple[int, int]]) -> RecordsCancelled:
        return cls(cancelled=[PositionOut(partition=p, offset=o) for p, o in positions])

    def returned(self) -> list[tuple[int, int]]:
        return [(r.partition, r.offset) for r in self.cancelled]


# ---------------------------------------------------------------- joins


class JoinMemberIn(In):
    """A job a join waits for: its record (partition, offset), or the continuation of
    an earlier join (`join`)."""

    topic: Name
    group: Name
    partition: Count | None = None
    offset: Offset | None = None
    join: Id | None = None

    def __post_init__(self) -> None:
        placed = self.partition is not None and self.offset is not None
        if placed == (self.join is not None) or (self.partition is None) != (self.offset is None):
            raise ValueError("a member gives partition and offset, or join")


class JoinRecordIn(RecordFields, kw_only=True):
    """The record a join appends, and the queue group that will lease it."""

    topic: Name
    group: Name


class JoinIn(In):
    id: Id
    members: Annotated[list[JoinMemberIn], Meta(min_length=1, max_length=limits.join_members_max)]
    then: JoinRecordIn | None = None
    on_error: JoinRecordIn | None = None
    allow_failures: bool = False

    def spec(self) -> JoinSpec:
        return JoinSpec(
            id=self.id,
            members=[
                JoinMember(
                    topic=m.topic,
                    group=m.group,
                    partition=-1 if m.partition is None else m.partition,
                    offset=-1 if m.offset is None else m.offset,
                    join=m.join,
                )
                for m in self.members
            ],
            then=None if self.then is None else _continuation(self.then),
            on_error=None if self.on_error is None else _continuation(self.on_error),
            allow_failures=self.allow_failures,
        )


def _continuation(given: JoinRecordIn) -> JoinContinuation:
    record = given.record()
    return JoinContinuation(
        topic=given.topic,
        group=given.group,
        value=record.value,
        key=record.key,
        headers=record.headers,
    )


class JoinsIn(In):
    """POST /v1/joins: joins to make (a canvas: a chain makes one a link)."""

    shape: ClassVar[str] = '{"joins": [{"id", "members": [...], "then": {...}}, ...]}'
    joins: Annotated[list[JoinIn], Meta(min_length=1, max_length=limits.joins_per_call_max)]


class JoinOut(Out, omit_defaults=True):
    id: str
    state: Literal["open", "fired", "failed"]
    members: Count
    arrived: Count
    topic: str
    partition: Count | None = None
    offset: Offset | None = None
    error: str = ""
    failed_ref: str = ""
    created_ms: int = 0
    ended_ms: int | None = None

    @classmethod
    def of(cls, info: JoinInfo) -> JoinOut:
        return cls(**msgspec.structs.asdict(info))

    def info(self) -> JoinInfo:
        return JoinInfo(**msgspec.structs.asdict(self))


class Joins(Out):
    joins: list[JoinOut]


# ---------------------------------------------------------------- unique records


class UniqueIn(RecordFields, kw_only=True):
    """POST .../queues/{group}/unique: a record unless one of its identity is live."""

    identity: Annotated[str, Meta(min_length=1, max_length=limits.unique_identity_chars_max)]
    replace: bool = False

    def arguments(self) -> dict[str, Any]:
        return {"identity": self.identity, "replace": self.replace, **self.record_arguments()}

    @classmethod
    def of_arguments(cls, **arguments: Any) -> UniqueIn:
        return request(cls, **cls.record_fields(arguments))

    def resend_safe(self) -> bool | None:
        return not self.replace  # the record appended first is then found live


class UniqueOut(Out):
    partition: int
    offset: int
    existing: bool
    replaced: list[PositionOut] = []

    @classmethod
    def of(cls, ack: UniqueAck) -> UniqueOut:
        return cls(
            partition=ack.partition,
            offset=ack.offset,
            existing=ack.existing,
            replaced=[PositionOut(partition=p, offset=o) for p, o in ack.replaced],
        )

    def returned(self) -> UniqueAck:
        return self.ack()

    def ack(self) -> UniqueAck:
        return UniqueAck(
            partition=self.partition,
            offset=self.offset,
            existing=self.existing,
            replaced=[(r.partition, r.offset) for r in self.replaced],
        )
