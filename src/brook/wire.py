"""The HTTP API's JSON shapes (docs/PROTOCOL.md), defined once. Pure: no I/O.

The server decodes requests and encodes answers with these Structs, the clients
encode requests and decode answers with the same ones, and /openapi.json's
schemas are generated from them (server/openapi.py), so the three cannot drift.

Requests (`...In`) refuse unknown fields: a misspelt field is a 400, never
silently ignored. Answers may grow fields, so clients ignore fields they do not
know. Values, keys and header values are bytes: in requests each may be given as
UTF-8 text (`value`, `key`, `headers`) or base64 (`value_b64`, ...), never both;
answers always carry the base64 forms, and the text forms too when the bytes are
valid UTF-8.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeVar

import msgspec
from msgspec import Meta

from brook import limits, validate
from brook.codec import encode_batch as encode_batch  # binary batches: a wire format
from brook.codec.batch import ClientBatches as ClientBatches
from brook.codec.batch import Columns as Columns
from brook.duplicate_keys import has_duplicates
from brook.errors import BadRequest, BrookError
from brook.event_headers import EVENT_TYPE_OR_GLOB_PATTERN
from brook.names import (
    HEADER_PATTERN,
    SECRET_PATTERN,
    TOPIC_OR_GLOB_PATTERN,
    URL_PATTERN,
    USER_NAME_PATTERN,
    Id,
    Name,
    Receipt,
)
from brook.records import (
    Ack,
    DeliveryStats,
    EndpointInfo,
    EventTypeInfo,
    JobInfo,
    JobStateName,
    JoinContinuation,
    JoinInfo,
    JoinMember,
    JoinSpec,
    PortalLink,
    Published,
    Record,
    Resent,
    ScheduleInfo,
    TopicInfo,
    UniqueAck,
)

JSON_TYPE = "application/json"
RAW_TYPE = "application/octet-stream"
"""A POST of records with this type is one record whose value is the body, as it is."""
BATCH_TYPE = "application/vnd.brook.batch"
"""The binary batch format's media type (docs/PROTOCOL.md)."""

Count = Annotated[int, Meta(ge=0, le=limits.whole_max)]
Offset = Annotated[int, Meta(ge=0, le=limits.whole_max, description="An offset in a partition")]
Positive = Annotated[int, Meta(ge=1, le=limits.whole_max)]
Millis = Annotated[int, Meta(ge=0, le=limits.whole_max, description="Milliseconds")]
Visibility = Annotated[int, Meta(ge=1, le=limits.visibility_timeout_ms_max)]
Reason = Annotated[str, Meta(description=f"Kept up to {limits.queue_reason_chars_max} characters")]


class In(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """A request body: unknown fields are refused; fields left out take their defaults."""

    shape: ClassVar[str] = ""
    """The body's shape in brief, added to an error about the body as a whole."""


class Out(msgspec.Struct, kw_only=True):
    """An answer's body: clients ignore fields they do not know (the API may grow)."""


# ---------------------------------------------------------------- records


BASE64_PATTERN = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
"""Standard base64 with its padding: what a `..._b64` field takes."""


class RecordFields(In):
    """A record's value, key and headers, each as text or as base64."""

    one_at_most: ClassVar[tuple[tuple[str, str], ...]] = (
        ("value", "value_b64"),
        ("key", "key_b64"),
        ("headers", "headers_b64"),
    )
    """Pairs of fields of which a request gives one at most (null is not given); the
    OpenAPI document states the same rules from here."""
    one_at_least: ClassVar[tuple[tuple[str, str], ...]] = (("value", "value_b64"),)
    """Pairs of fields of which a request gives one at least."""

    value: str | None = None
    value_b64: bytes | None = None
    key: str | None = None
    key_b64: bytes | None = None
    headers: dict[str, str] | None = None
    headers_b64: dict[str, bytes] | None = None

    def __post_init__(self) -> None:
        for first, second in self.one_at_least:
            if getattr(self, first) is None and getattr(self, second) is None:
                raise ValueError(f"a record needs {first} or {second}")
        for first, second in self.one_at_most:
            if getattr(self, first) is not None and getattr(self, second) is not None:
                raise ValueError(f"give {first} or {second}, not both")

    def record(self) -> Record:
        """The record, checked for size (RecordTooLarge)."""
        # Text from msgspec always encodes: it refuses lone surrogates ("\ud800").
        value = self.value_b64 if self.value is None else self.value.encode()
        key = self.key_b64 if self.key is None else self.key.encode()
        headers: dict[str, bytes] | None = self.headers_b64
        if self.headers is not None:
            headers = {name: text.encode() for name, text in self.headers.items()}
        record, _ = validate.record(value, key, headers or None)
        return record


class RecordIn(RecordFields):
    idempotency_key: (
        Annotated[str, Meta(min_length=1, max_length=limits.idempotency_key_bytes_max)] | None
    ) = None


class RecordsIn(In):
    """POST /v1/topics/{topic}/records, PUT .../staged/...: records to append."""

    shape: ClassVar[str] = (
        'the body is {"records": [{"value": "..."}, ...]} (or, as application/octet-stream, '
        "one record's value as it is)"
    )
    records: list[RecordIn]

    def keys_held(self) -> int:
        """How many keys a body needs at least to decode to this (for duplicate_keys):
        `records`, each record's fields that are not null, and every header."""
        count = 1
        astuple = msgspec.structs.astuple
        for record in self.records:
            fields = astuple(record)
            count += len(fields) - fields.count(None)
            if record.headers:
                count += len(record.headers)
            if record.headers_b64:
                count += len(record.headers_b64)
        return count

    def columns(self, record_bytes_max: int = limits.record_bytes_max_default) -> Columns:
        """The records as Columns to append, checked (RecordTooLarge, BadRequest)."""
        records = [item.record() for item in self.records]
        keys = [validate.idempotency_key(item.idempotency_key) for item in self.records]
        columns = Columns.from_records(records, keys)
        return validate.sized(columns, record_bytes_max=record_bytes_max)


class StagedRecordsIn(RecordsIn):
    """PUT .../staged/...: records to stage; no idempotency keys (the publish of a seq
    is exactly once already)."""

    records: list[RecordFields]  # type: ignore[assignment]

    def columns(self, record_bytes_max: int = limits.record_bytes_max_default) -> Columns:
        columns = Columns.from_records([item.record() for item in self.records])
        return validate.sized(columns, record_bytes_max=record_bytes_max)


class RecordOut(Out, omit_defaults=True):
    partition: Count
    offset: Offset
    timestamp: int
    value_b64: bytes
    headers_b64: dict[str, bytes]
    value: str | None = None
    key_b64: bytes | None = None
    key: str | None = None
    headers: dict[str, str] | None = None

    @classmethod
    def of(cls, record: Record) -> RecordOut:
        headers = record.headers or {}
        return cls(
            partition=record.partition,
            offset=record.offset,
            timestamp=record.timestamp,
            value_b64=record.value,
            value=text_of(record.value),
            key_b64=record.key,
            key=None if record.key is None else text_of(record.key),
            headers_b64=headers,
            headers=_texts(headers),
        )

    def record(self, topic: str) -> Record:
        return Record(
            self.value_b64,
            self.key_b64,
            self.headers_b64 or None,
            topic,
            self.partition,
            self.offset,
            self.timestamp,
        )


def text_of(data: bytes) -> str | None:
    """`data` as text when it is valid UTF-8, else None (answers carry base64 too)."""
    try:
        return data.decode()
    except UnicodeDecodeError:  # the text form only when it is text
        return None


def _texts(headers: dict[str, bytes]) -> dict[str, str] | None:
    try:
        return {name: value.decode() for name, value in headers.items()}
    except UnicodeDecodeError:
        return None


class Acks(Out):
    acks: list[Ack]


class RecordPage(Out):
    records: list[RecordOut]
    next_offset: Offset


class Polled(Out):
    records: list[RecordOut]


# ---------------------------------------------------------------- topics


class TopicSettingsIn(In):
    """PUT /v1/topics/{topic}: settings left out take their defaults."""

    partitions: Annotated[int, Meta(ge=1, le=limits.partitions_max)] | None = None
    retention_ms: Positive | None = None
    retention_bytes: Positive | None = None
    compaction: bool | None = None
    lake: bool | None = None
    value_schema: dict[str, Any] | None = None

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in msgspec.structs.asdict(self).items() if v is not None}


class TopicOut(Out):
    name: str
    partitions: Positive
    retention_ms: int | None
    retention_bytes: int | None
    compaction: bool
    end_offsets: dict[int, Offset]
    """Partition -> the offset the next record will get."""
    lake: bool | None = None
    """Whether the topic is kept as Parquet too; null: as the broker does."""
    value_schema: dict[str, Any] | None = None
    """The JSON Schema its values follow (the lake's typed columns); null: none."""

    @classmethod
    def of(cls, info: TopicInfo) -> TopicOut:
        return cls(**msgspec.structs.asdict(info))

    def info(self) -> TopicInfo:
        return TopicInfo(
            self.name,
            self.partitions,
            self.retention_ms,
            self.retention_bytes,
            self.compaction,
            self.end_offsets,
            self.lake,
            self.value_schema,
        )


class TopicDetail(TopicOut, kw_only=True):
    start_offsets: dict[int, Offset]
    """Partition -> the first offset still retained."""

    @classmethod
    def detail(cls, info: TopicInfo, start_offsets: dict[int, int]) -> TopicDetail:
        return cls(**msgspec.structs.asdict(info), start_offsets=start_offsets)


class Topics(Out):
    topics: list[TopicOut]


class LakePartitionOut(Out):
    partition: Count
    lake_offset: Offset
    """The offset after the last one the lake holds."""
    end_offset: Offset
    """The offset after the last acknowledged record."""
    pending: Count
    """Records acknowledged but not yet in the lake."""
    lag_ms: Count
    """How long the oldest of them has waited."""


class LakeHistoryOut(Out):
    group: str
    files: Count
    rows: Count
    """Transitions in the lake."""
    lake_offset: Offset
    """The status-log offset after the last entry the lake took."""
    end_offset: Offset
    """The status-log offset after its last durable entry."""


class LakeTopicOut(Out):
    topic: str
    files: Count
    bytes: Count
    rows: Count
    partitions: list[LakePartitionOut]
    histories: list[LakeHistoryOut] = []
    """Its queue groups' histories (delivery groups included)."""


class Lake(Out):
    """Where the lake stands: each topic's Parquet files and position (GET /v1/lake,
    and the answer of POST /v1/lake/sync)."""

    topics: list[LakeTopicOut]


class LakeSyncIn(In):
    """What to write to the lake now: one topic, or every topic."""

    topic: Name | None = None


class Deleted(Out):
    deleted: str


# ---------------------------------------------------------------- stream groups


class CommitIn(In):
    """Commit these offsets; without them, the group's position."""

    offsets: (
        Annotated[
            dict[Annotated[int, Meta(ge=0)], Offset],
            Meta(extra_json_schema={"propertyNames": {"pattern": PARTITION_KEY_PATTERN}}),
        ]
        | None
    ) = None


class SeekIn(In):
    partition: Count
    offset: Offset


class GroupOut(Out):
    topic: str
    group: str
    positions: dict[int, Offset]
    committed: dict[int, Offset]
    lag: dict[int, Count]


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
            out["backoff"] = _given(self.backoff)
        return out


def _given(struct: msgspec.Struct) -> dict[str, Any]:
    return {k: v for k, v in msgspec.structs.asdict(struct).items() if v is not None}


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


class PositionIn(In):
    partition: Count
    offset: Offset


class RedriveIn(In):
    """Redrive every dead record, those named, or up to `limit` of them."""

    limit: Positive | None = None
    records: Annotated[list[PositionIn], Meta(max_length=limits.redrive_records_max)] | None = None

    def positions(self) -> list[tuple[int, int]] | None:
        return None if self.records is None else [(r.partition, r.offset) for r in self.records]


class Redriven(Out):
    redriven: Count


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


class PositionOut(Out):
    partition: int
    offset: int


class RecordsCancelled(Out):
    cancelled: list[PositionOut]
    """The records cancelled: those that were waiting (ready, delayed or retrying)."""


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

    def ack(self) -> UniqueAck:
        return UniqueAck(
            partition=self.partition,
            offset=self.offset,
            existing=self.existing,
            replaced=[(r.partition, r.offset) for r in self.replaced],
        )


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


class TimersPage(Out):
    timers: list[TimerOut]
    next: str | None = None
    """The cursor for the page after (the `after` parameter); null on the last page."""


class Cancelled(Out):
    cancelled: str


# ---------------------------------------------------------------- staged writes


class PublishIn(In):
    parts: dict[Id, Annotated[int, Meta(ge=0, le=limits.staging_chunks_per_part_max)]]
    """Part id -> how many chunks it staged."""


class Staged(Out):
    staged: bool
    """False when seq was published already."""


class Dropped(Out):
    dropped: bool


# ---------------------------------------------------------------- health and errors


class Failing(Out, omit_defaults=True):
    loop: str
    task: str | None
    error: str
    since_ms: int
    failures: int
    subject: str | None = None
    """Whose work fails (an endpoint, a queue group), in `isolated`."""


class Health(Out, omit_defaults=True):
    status: Literal["ok", "failing"]
    failing: list[Failing] | None = None
    """Background loops failing: the broker does not serve as it should (503)."""
    isolated: list[Failing] | None = None
    """Work for single endpoints or queue groups failing now, the first
    HEALTH_ISOLATED_MAX of them: theirs alone, the broker serves the others (200)."""
    isolated_count: int = 0


class ErrorDetail(Out):
    code: str
    message: str


class ErrorOut(Out):
    error: ErrorDetail


# ---------------------------------------------------------------- encoding

encode = msgspec.json.Encoder().encode

T = TypeVar("T")
# ---------------------------------------------------------------- delivery endpoints


PARTITION_KEY_PATTERN = "^(0|[1-9][0-9]{0,17})$"
"""A partition number as a JSON object's key: decimal digits, no leading zero (within the
63 bits an offset has; a partition the topic lacks is a 404)."""
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

    def given(self) -> dict[str, Any]:
        fields = _given(self)
        if self.backoff is not None:
            fields["backoff"] = _given(self.backoff)
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


class EventTypes(Out):
    event_types: list[EventTypeInfo]
    """records.EventTypeInfo is the answer's shape itself (as EndpointInfo is)."""


class Endpoints(Out):
    endpoints: list[EndpointInfo]
    """records.EndpointInfo is the answer's shape itself (as Published is)."""


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


class Attempts(Out):
    attempts: list[AttemptOut]


class EndpointAttemptsOut(Out):
    endpoint: str
    attempts: list[AttemptOut]


class MessageAttemptsOut(Out):
    endpoints: list[EndpointAttemptsOut]
    """Each endpoint that tried to deliver the message, with its attempts, oldest first."""


class ResendIn(In):
    """One message sent again: Brook's webhook-id (topic:partition:offset) or the
    sender's event id the record carried."""

    webhook_id: Annotated[str, Meta(min_length=1, max_length=limits.event_id_chars_max)]


class EndpointRedriveIn(In):
    """Dead records back to work: of one topic or all, up to limit, or those named."""

    topic: Name | None = None
    limit: Positive | None = None
    records: Annotated[list[PositionIn], Meta(max_length=limits.redrive_records_max)] | None = None

    def positions(self) -> list[tuple[int, int]] | None:
        if self.records is None:
            return None
        return [(p.partition, p.offset) for p in self.records]


class EndpointReplayIn(In):
    """Records already delivered sent again: from a time, or from an offset of one topic."""

    topic: Name | None = None
    since_ms: Count | None = None
    partition: Count | None = None
    offset: Count | None = None


class Replayed(Out):
    replayed: Count
    """How many records go again."""


class TestOut(Out):
    __test__ = False

    status: int | None
    latency_ms: float
    error: str
    excerpt_b64: bytes
    excerpt: str | None = None


class RotateIn(In):
    secret: Secret | None = None


class Rotated(Out):
    secret: str


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    return decoder


def decode_request(body: bytes, kind: type[T], empty_ok: bool = False) -> T:
    """A request body as `kind`; BadRequest saying what is wrong and where.

    With `empty_ok`, an empty body is `kind()` (every field left out)."""
    if empty_ok and not body.strip():
        return kind()
    try:
        try:
            decoded: T = _decoder(kind).decode(body)
        except msgspec.ValidationError as exc:
            if "got `float`" not in str(exc):
                raise
            decoded = _decoder(kind).decode(_integral_floats_as_ints(body))
    except msgspec.ValidationError as exc:
        whole = " - at `$" not in str(exc)  # about the body itself, not a field inside it
        shape: str = getattr(kind, "shape", "")
        hint = f"; {shape}" if whole and shape else ""
        raise BadRequest(f"invalid body: {exc}{hint}") from None
    except msgspec.DecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise BadRequest("the body is not valid JSON: it is not UTF-8") from None
    except RecursionError:
        raise BadRequest("the body is not valid JSON: it is nested too deeply") from None
    if has_duplicates(body, decoded):
        raise BadRequest("invalid body: an object names the same field twice")
    return decoded


EXACT_FLOAT_MAX = 2**53
"""Past this a JSON number written with a fraction or exponent may not be the integer meant."""


def _integral_floats_as_ints(body: bytes) -> bytes:
    """The body with every number written as a whole float (`2.0`, `1e3`) written as an
    integer: JSON Schema's `integer` takes them (2020-12: a number with no fraction), so
    the API does too. Only the bodies first refused for a float go through this."""

    def whole(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer() and abs(value) <= EXACT_FLOAT_MAX:
            return int(value)
        if isinstance(value, list):
            return [whole(item) for item in value]
        if isinstance(value, dict):
            return {name: whole(item) for name, item in value.items()}
        return value

    return msgspec.json.encode(whole(msgspec.json.decode(body)))


def request(kind: type[T], **fields: Any) -> T:
    """A request body built from Python values (the clients' side), checked like the
    server checks it; BadRequest when a field does not fit."""
    try:
        return msgspec.convert(fields, kind)
    except msgspec.ValidationError as exc:
        raise BadRequest(str(exc)) from None


def decode_answer(body: bytes, kind: type[T]) -> T:
    """An answer's body as `kind` (the client's side); msgspec errors pass up as they are."""
    decoded: T = _decoder(kind).decode(body)
    return decoded


def error_body(error: BrookError) -> bytes:
    return encode(ErrorOut(error=ErrorDetail(code=error.code, message=error.message)))


REQUESTS: tuple[type[In], ...] = (
    RecordsIn,
    LakeSyncIn,
    StagedRecordsIn,
    TopicSettingsIn,
    CommitIn,
    SeekIn,
    QueueSettingsIn,
    LeaseIn,
    SettleIn,
    AckIn,
    NackIn,
    ExtendIn,
    RedriveIn,
    CancelIn,
    UniqueIn,
    JoinsIn,
    TimerIn,
    ScheduleIn,
    TimersIn,
    PublishIn,
    EndpointIn,
    EndpointRedriveIn,
    EndpointReplayIn,
    ResendIn,
    EventTypeIn,
    PortalIn,
    RotateIn,
)
ANSWERS: tuple[type[Out], ...] = (
    Acks,
    Lake,
    RecordPage,
    Polled,
    TopicOut,
    TopicDetail,
    Topics,
    Deleted,
    GroupOut,
    QueueOut,
    Jobs,
    Settled,
    Trace,
    JobInfoOut,
    ScheduleOut,
    Schedules,
    Redriven,
    RecordsCancelled,
    UniqueOut,
    JoinOut,
    Joins,
    Replayed,
    Scheduled,
    ScheduledMany,
    TimerOut,
    TimersPage,
    Cancelled,
    Staged,
    Dropped,
    Health,
    ErrorOut,
    Endpoints,
    EventTypes,
    Attempts,
    MessageAttemptsOut,
    TestOut,
    Rotated,
)
"""Every shape, for the OpenAPI document's components (`Published` is records.Published)."""
ALSO_ANSWERS: tuple[type[msgspec.Struct], ...] = (
    Published,
    EndpointInfo,
    DeliveryStats,
    EventTypeInfo,
    PortalLink,
    Resent,
)
