"""The values users hand to Brook and get back from it."""

from __future__ import annotations

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


class TopicInfo(msgspec.Struct, frozen=True):
    """A topic's name, settings and next offset per partition."""

    name: str
    partitions: int
    retention_ms: int | None
    retention_bytes: int | None
    compaction: bool
    end_offsets: dict[int, int]


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
