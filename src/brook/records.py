"""The values users hand to Brook and get back from it."""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec


class Record(msgspec.Struct, gc=False):
    """One record: what the user wrote, plus where and when the log put it.

    On append only `value`, `key` and `headers` matter; `topic`, `partition`,
    `offset` and `timestamp` are filled in by the broker on read.
    """

    value: bytes
    key: bytes | None = None
    headers: dict[str, bytes] | None = None
    topic: str = ""
    partition: int = -1
    offset: int = -1
    timestamp: int = -1
    """Milliseconds since the epoch, assigned by the broker when the batch was written."""


class Ack(msgspec.Struct, frozen=True, gc=False):
    """Proof that a record is durable: where it landed and when."""

    partition: int
    offset: int
    timestamp: int


class TopicConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """A topic's settings, stored with the topic."""

    partitions: int = 1
    retention_ms: int | None = None
    retention_bytes: int | None = None
    compaction: bool = False
    lake: bool | None = None
    """Whether the topic is also kept as Parquet (brook/lake/); None: as the broker
    does (`lake=True`, `brook serve --lake`)."""
    value_schema: dict[str, Any] | None = None
    """The JSON Schema of the values (brook/value_schema.py): the lake keeps their
    fields as typed columns too."""


class TopicInfo(msgspec.Struct, frozen=True):
    """A topic's name, settings and next offset per partition."""

    name: str
    partitions: int
    retention_ms: int | None
    retention_bytes: int | None
    compaction: bool
    end_offsets: dict[int, int]
    lake: bool | None = None
    """The topic's own lake setting (None: the broker's)."""
    value_schema: dict[str, Any] | None = None
    """The JSON Schema its values follow, for the lake's typed columns (None: none)."""


class PartitionLake(msgspec.Struct, frozen=True):
    """Where the lake stands for one partition of a topic (`b.lake_status()`)."""

    partition: int
    lake_offset: int
    """The offset after the last one the lake holds (where the log starts, when none)."""
    end_offset: int
    """The offset after the last acknowledged record of the log."""
    pending: int
    """Offsets acknowledged but not yet in the lake."""
    lag_ms: int
    """How long the oldest of them has waited (0 when none)."""


class HistoryLake(msgspec.Struct, frozen=True):
    """Where the lake stands for one queue group's history (its status log)."""

    group: str
    files: int
    rows: int
    """Transitions in the lake."""
    lake_offset: int
    """The status-log offset after the last entry the lake took."""
    end_offset: int
    """The status-log offset after its last durable entry."""

    @property
    def pending(self) -> int:
        """Status-log entries not yet in the lake."""
        return max(0, self.end_offset - self.lake_offset)


class LakeStatus(msgspec.Struct, frozen=True):
    """Where the lake stands for a topic: its Parquet files, each partition, and its
    queue groups' histories."""

    topic: str
    files: int
    bytes: int
    rows: int
    partitions: list[PartitionLake]
    histories: list[HistoryLake] = msgspec.field(default_factory=list)

    @property
    def pending(self) -> int:
        return sum(p.pending for p in self.partitions)

    @property
    def lag_ms(self) -> int:
        return max((p.lag_ms for p in self.partitions), default=0)


class Job(msgspec.Struct, gc=False):
    """A record leased from a queue group: settle it with its `receipt`."""

    record: Record
    attempt: int
    """1 on the first delivery; counts every lease of the record so far."""
    receipt: str
    """Names this lease; valid only while the lease is live."""


class Published(msgspec.Struct, frozen=True):
    """The answer to a publish of staged records (brook/staging)."""

    seq: int
    records: int | None
    """Records the publish appended in all; None when a later `seq` was published
    since (this one was then published, or given up, before it)."""
    replayed: bool
    """True when this call found the publish done or begun already (a replay)."""


class EndpointInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A delivery endpoint's settings (SPEC §7). `secret` is set only in the answer
    that made or changed the secret: it is shown once, never again."""

    name: str
    url: str
    topics: list[str]
    headers: dict[str, str]
    timeout_ms: int
    max_in_flight: int
    rate_limit_per_s: int | None
    max_attempts: int
    backoff: dict[str, float]
    expire_after_ms: int | None
    disable_after_ms: int | None
    ordering: str
    enabled: bool
    start: str
    disabled_reason: str
    created_ms: int
    secret: str | None = None
    tenant: str | None = None
    """The customer it belongs to, if any (SPEC §11)."""
    event_types: list[str] | None = None
    """The event types it takes (brook.event-type), or None: every record."""
    signature: str = "v1"
    """The secrets Brook makes for it: v1 (HMAC) or v1a (Ed25519)."""
    public_key: str | None = None
    """With an Ed25519 secret (v1a): its public key, `whpk_...`, for receivers (not a
    secret: shown always)."""
    warnings: list[str] = msgspec.field(default_factory=list)
    """In the answer that made or changed it: what was accepted but looks wrong (a
    pattern that matches no topic yet, an event type not in the catalog)."""


class EventTypeInfo(msgspec.Struct, frozen=True, kw_only=True):
    """An event type of the catalog (SPEC §11): `invoice.paid`, what it means, and a JSON
    Schema of its events' bodies (documentation for receivers, not enforced)."""

    name: str
    description: str = ""
    schema: dict[str, Any] | None = None
    created_ms: int
    updated_ms: int


class PortalLink(msgspec.Struct, frozen=True, kw_only=True):
    """A short-lived link to the dashboard for one tenant's endpoints (SPEC §11)."""

    tenant: str
    path: str
    """`/ui/portal/<token>`, on the server that serves this broker."""
    expires_ms: int
    url: str | None = None
    """The whole link, where the server that made it knows its own address."""


class Resent(msgspec.Struct, frozen=True, kw_only=True):
    """A message sent once more to one endpoint (`Endpoint.resend`)."""

    webhook_id: str
    topic: str
    partition: int
    offset: int
    state: str
    """resent (it had been delivered: it goes again), redriven (it was dead: it goes
    again, attempts counted afresh) or pending (it was on its way: it goes anyway)."""


class DeliveryStats(msgspec.Struct, frozen=True, kw_only=True):
    """An endpoint's records by state (over its topics), and how its attempts go."""

    ready: int
    leased: int
    retrying: int
    acked: int
    dead: int
    in_flight: int
    breaker: str
    """closed, open or half_open."""
    success_rate: float | None
    """The share of recent attempts answered 2xx (None before any)."""
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    attempts: dict[str, int]
    """Attempts since the broker started, by what followed: ack, retry, dead, disable."""
    last_error: str
    last_error_ms: int
    next_attempt_ms: int | None = None
    """When its next attempt is due: now while records are ready, the breaker's probe
    while it is open, the first retry when only retries wait; None when nothing waits
    or it is disabled."""
    failing: str = ""
    """Why the broker's own work for the endpoint fails now (storing a dead letter,
    leasing, settling: "task: error"; "" when nothing does). Its failure alone: the
    other endpoints go on."""
    failing_since_ms: int | None = None


class Attempt(msgspec.Struct, frozen=True, kw_only=True):
    """One delivery attempt of a record, as its queue group's status log keeps it."""

    attempt: int
    at_ms: int
    state: str
    """What followed: acked, retrying or dead."""
    status: int | None
    latency_ms: float
    error: str
    reason: str
    excerpt: bytes
    """The first 2 KiB of the answer's body."""


class MessageAttempts(msgspec.Struct, frozen=True, kw_only=True):
    """The attempts one endpoint made to deliver a message (`b.message_attempts(id)`)."""

    endpoint: str
    attempts: list[Attempt]


class TestResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of `endpoint.test()`: a signed request sent now, outside any queue."""

    __test__ = False  # not a pytest test class

    status: int | None
    latency_ms: float
    error: str
    excerpt: bytes


# ---------------------------------------------------------------- read models
# What the shells (server, dashboard, /metrics, CLI) read about a running broker:
# plain values made by the broker, so no shell reaches into its parts.


class PartitionInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One partition of a topic as it stands: offsets and what its segments hold."""

    partition: int
    start_offset: int
    """The oldest retained offset."""
    end_offset: int
    """The next offset (every record below it is durable)."""
    bytes: int
    """Bytes of its retained segments."""
    segments: int


class Histogram(msgspec.Struct, frozen=True, kw_only=True):
    """Observations per bucket: counts[i] fell at or below bounds[i] (and above the
    bound before); the last count is above every bound. Not cumulative."""

    bounds: tuple[float, ...]
    counts: list[int]
    sum: float


class TimerStats(msgspec.Struct, frozen=True, kw_only=True):
    """The timers as they stand: how many wait, when they are due, how late they fired."""

    pending: int
    pending_by_day: list[tuple[int, int]]
    """(the day's first ms since the epoch, timers due that day), by day."""
    fired: int
    """Timers fired since the broker started."""
    lag_s: Histogram
    """How late timers fired: when their record was durable minus when they were due."""


class Recent(msgspec.Struct, frozen=True, kw_only=True):
    """One recent delivery attempt, as the dashboard lists it."""

    at_ms: int
    topic: str
    partition: int
    offset: int
    attempt: int
    outcome: str
    """What followed: ack, retry, dead or disable."""
    status: str
    """The HTTP status, or the error kind when there was none."""
    latency_ms: float
    reason: str


class DeliveryCounters(msgspec.Struct, frozen=True, kw_only=True):
    """An endpoint's counters since the broker started, for /metrics."""

    attempts: dict[str, int]
    """By what followed: ack, retry, dead, disable."""
    statuses: dict[str, int]
    """By HTTP status, or by error kind when there was none."""
    latency_s: Histogram
    in_flight: int
    breaker: str
    failing: bool
    """True while the broker's own work for the endpoint fails."""
    backlog: int
    """Records waiting to be delivered (ready, leased or retrying)."""


class DeliverySummary(msgspec.Struct, frozen=True, kw_only=True):
    """Delivery over every endpoint, for /metrics: what it did since the broker started,
    where the endpoints stand now, and which of them get series of their own."""

    attempts: dict[str, int]
    """By what followed (ack, retry, dead, disable), deleted endpoints' attempts too."""
    statuses: dict[str, int]
    """By HTTP status, or by error kind when there was none."""
    latency_s: Histogram
    in_flight: int
    backlog: int
    """Records waiting to be delivered (ready, leased or retrying), over every endpoint."""
    endpoints: dict[str, int]
    """How many are healthy, failing (enabled, and its breaker not closed, its attempts
    failing or the broker's own work for it failing) and disabled."""
    breakers: dict[str, int]
    """How many endpoints' circuit breakers are closed, open and half_open."""
    shown: list[str]
    """The endpoints whose own series /metrics gives: those failing now (disabled by a
    failure too) first, then those chosen, each by name; at most
    limits.metrics_endpoints_shown_max."""
    left_out: int
    """Failing or chosen endpoints past that cap: they count in the aggregates only."""
    shown_groups: list[tuple[str, str]]
    """The queue groups (topic, group) of the endpoints shown, in their order, each
    endpoint's by topic; at most limits.metrics_endpoint_groups_shown_max."""


class StorageStats(msgspec.Struct, frozen=True, kw_only=True):
    """What the storage did since the broker started: requests and bytes for an object
    store (what it bills for), its local cache, and the free space where data lives."""

    object_store: bool
    requests: dict[str, int]
    """Object-store requests by kind (put, get, list, delete); empty on local disk."""
    bytes_sent: int
    bytes_received: int
    cache_hits: int | None
    cache_misses: int | None
    cache_bytes: int | None
    disk_free_bytes: int | None
    """Free space of the data directory, or of the object store's local cache."""


class DeadRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A dead record of a queue group, as its status log knows it."""

    partition: int
    offset: int
    attempts: int
    error: str
    redriven: int
    """How many times it was put back to work before."""


JobStateName = Literal[
    "pending", "ready", "delayed", "leased", "retrying", "acked", "dead", "unknown"
]
JOB_STATES: tuple[JobStateName, ...] = get_args(JobStateName)


class JobInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Where one record stands in a queue group (`q.job(partition, offset)`).

    `state` is one of JOB_STATES: `pending` (in the topic, not yet taken into the
    group's window of unfinished records), `ready`, `delayed` (ready from its
    not-before time), `leased`, `retrying`, `acked`, `dead`, or `unknown` (no such
    record: past the end of its partition, or removed by retention)."""

    partition: int
    offset: int
    state: JobStateName
    attempt: int = 0
    """Deliveries so far (of the current life, after a redrive)."""
    error: str = ""
    """Why the last attempt failed (for retrying and dead records)."""
    result: bytes | None = None
    """What it returned, given with its ack, while the group keeps it (limits.queue_results_*)."""
    acked_ms: int | None = None
    """When it was acked, if that is still known."""
    due_ms: int | None = None
    """When a delayed or retrying record is due, or a leased one's lease ends."""


class UniqueAck(msgspec.Struct, frozen=True, kw_only=True):
    """What `q.enqueue_unique` did: the live record of the identity (`existing`: one
    that was there already, nothing appended) and, with `replace`, the waiting records
    it cancelled to take their place."""

    partition: int
    offset: int
    existing: bool
    replaced: list[tuple[int, int]] = []


class JoinMember(msgspec.Struct, frozen=True, kw_only=True):
    """A job the join waits for: the record at (partition, offset) of `topic`,
    finished in queue group `group`; or, with `join`, the continuation of that join
    (appended to `topic`, leased through `group`) once it is appended."""

    topic: str
    group: str
    partition: int = -1
    offset: int = -1
    join: str | None = None


class JoinContinuation(msgspec.Struct, frozen=True, kw_only=True):
    """The record a join appends: to `topic`, leased through `group`."""

    topic: str
    group: str
    value: bytes
    key: bytes | None = None
    headers: dict[str, bytes] | None = None


class JoinSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A join as its creator gave it."""

    id: str
    members: list[JoinMember]
    then: JoinContinuation | None = None
    """What it appends once every member is acked (None: nothing; a join that only
    watches its members, for its on_error)."""
    on_error: JoinContinuation | None = None
    allow_failures: bool = False


class JoinInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A join (`b.create_joins`, brook/joins): `state` is `open` (members still to
    finish), `fired` (every member acked: its continuation is appended to `topic`, at
    `partition`/`offset` once it is; a join with no continuation names its first
    member's topic) or `failed` (a member dead: `error` and
    `failed_ref`, that member's record, say which; the continuation never runs)."""

    id: str
    state: str
    members: int
    arrived: int
    topic: str
    partition: int | None = None
    offset: int | None = None
    error: str = ""
    failed_ref: str = ""
    created_ms: int = 0
    ended_ms: int | None = None


class ScheduleInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A periodic schedule (`b.put_schedule`): what it appends, when, and where it stands."""

    name: str
    topic: str
    cron: str | None
    every_ms: int | None
    tz: str
    missed: str
    """skip or run_once: what a slot the broker was down over gets."""
    paused: bool
    next_ms: int | None
    """The next slot (None while paused)."""
    last_slot_ms: int | None
    last_fired_ms: int | None
    """When the last slot's record was appended."""
    last_partition: int | None
    last_offset: int | None
    fired: int
    skipped: int
    created_ms: int
    value: bytes
    key: bytes | None
    headers: dict[str, bytes] | None
