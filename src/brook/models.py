"""The public types of Brook in one place: the values it takes and gives back.

A leaf, as River keeps `rivertype`: it imports no part of the engine (an import
contract in pyproject.toml holds it to that), so the remote client, the shells and
the task layer take their types from here without loading the broker. The handles a
broker hands out (a topic, a consumer, a queue, an endpoint) are not values: their
types are the Protocols in brook/api.py, which both the embedded broker and the
clients satisfy.

Most values are defined in brook/records.py (a compiled module of the hot path);
the queue's, the timers' and the loops' value types are defined here, and the
engine's modules import them from here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import msgspec

from brook import limits
from brook.records import (
    Ack,
    Attempt,
    DeadRecord,
    DeliveryCounters,
    DeliveryStats,
    DeliverySummary,
    EndpointInfo,
    EventTypeInfo,
    Histogram,
    HistoryLake,
    Job,
    JobInfo,
    JoinContinuation,
    JoinInfo,
    JoinMember,
    JoinSpec,
    LakeStatus,
    MessageAttempts,
    PartitionInfo,
    PartitionLake,
    PortalLink,
    Published,
    Recent,
    Record,
    Resent,
    ScheduleInfo,
    StorageStats,
    TestResult,
    TimerStats,
    TopicConfig,
    TopicInfo,
    UniqueAck,
)
from brook.stats import CommitStats

# ---------------------------------------------------------------- queue groups


class State(enum.Enum):
    """Where a record stands in a queue group (queue/lifecycle.py draws the machine)."""

    READY = "ready"
    LEASED = "leased"
    RETRYING = "retrying"
    ACKED = "acked"
    DEAD = "dead"

    # Members are singletons: hashing by identity is right, and much cheaper than
    # Enum's hash of the name (states are dict keys on every transition).
    __hash__ = object.__hash__


class Backoff(msgspec.Struct, frozen=True):
    """Delay before attempt n+1 after attempt n failed: min_ms * factor**(n-1), at most
    max_ms, with up to `jitter` of it taken off at random (so retries spread out).
    brook/retry.py computes it; every retry loop of Brook's is one of these."""

    min_ms: int = limits.backoff_min_ms_default
    factor: float = limits.backoff_factor_default
    max_ms: int = limits.backoff_max_ms_default
    jitter: float = limits.backoff_jitter_default


class Outcome(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """How an attempt went, as the group's consumer tells it when it settles the
    record (the broker's delivery workers do: an HTTP status, how long it took,
    why it failed, the start of the answer)."""

    status: int | None = None
    latency_ms: float = 0.0
    error: str = ""
    """Why there was no status (timeout, connection, ...), or ""."""
    excerpt: bytes = b""
    result: bytes | None = None
    """What the job returned, given with its ack (queue/results.py)."""


class Transition(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One line of a record's trace, as appended to the status log."""

    at_ms: int
    state: State
    attempt: int
    reason: str = ""
    receipt: str | None = None
    until_ms: int = 0
    """Lease expiry for `leased`; when it is due again for `retrying`."""
    outcome: Outcome | None = None
    """For the transition that ended an attempt, when the consumer told how it went.
    (Last, so that entries written before it existed read as None.)"""


class ErrorGroup(msgspec.Struct, frozen=True):
    """Dead records of one group: its key, how many, and the whole reason one of them
    (the first the queue group learned of) died of, for a representative traceback
    (queue/error_groups.py says how reasons are grouped)."""

    group: str
    dead: int
    """How many of its records are dead."""
    example: str


# ---------------------------------------------------------------- timers


class TimerInfo(msgspec.Struct, frozen=True):
    """What `b.timer(id)` tells: a timer's state, and where it fired."""

    timer_id: str
    state: str
    """"pending", "fired" or "cancelled"."""
    topic: str
    due_ms: int
    partition: int | None = None
    """Where the record was appended, once fired."""
    offset: int | None = None
    at_ms: int | None = None
    """When it fired or was cancelled."""


class TimerPage(msgspec.Struct, frozen=True):
    """What `b.list_timers(...)` gives: pending timers in order of due time (then id),
    and `next`, the cursor to pass as `after` for the page after (None: the last)."""

    timers: list[TimerInfo]
    next: str | None = None


class TimerSpec(msgspec.Struct, frozen=True):
    """A timer to schedule (for `schedule_many`): due `at` (ms since the epoch) or
    after `delay_ms`, or now when neither is given."""

    topic: str
    value: bytes
    at: int | None = None
    delay_ms: int | None = None
    key: bytes | None = None
    headers: dict[str, bytes] | None = None
    timer_id: str | None = None


# ---------------------------------------------------------------- the broker's loops


@dataclass
class Failure:
    """A loop (or one task of it) that is failing now (brook/supervisor.py)."""

    loop: str
    task: str | None
    error: str
    since_ms: int
    count: int
    """Failures in a row."""
    subject: str | None = None
    """Whose work failed ("endpoint a", "queue group t/g"); None for the loop's own."""


__all__ = [
    "Ack",
    "Attempt",
    "Backoff",
    "CommitStats",
    "DeadRecord",
    "DeliveryCounters",
    "DeliveryStats",
    "DeliverySummary",
    "EndpointInfo",
    "ErrorGroup",
    "EventTypeInfo",
    "Failure",
    "Histogram",
    "HistoryLake",
    "Job",
    "JobInfo",
    "JoinContinuation",
    "JoinInfo",
    "JoinMember",
    "JoinSpec",
    "LakeStatus",
    "MessageAttempts",
    "Outcome",
    "PartitionInfo",
    "PartitionLake",
    "PortalLink",
    "Published",
    "Recent",
    "Record",
    "Resent",
    "ScheduleInfo",
    "State",
    "StorageStats",
    "TestResult",
    "TimerInfo",
    "TimerPage",
    "TimerSpec",
    "TimerStats",
    "TopicConfig",
    "TopicInfo",
    "Transition",
    "UniqueAck",
]
