"""The JSON shapes of topics, the lake, stream groups and staged writes (docs/PROTOCOL.md)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from brook import limits, validate
from brook.names import (
    Id,
    Name,
)
from brook.records import LakeStatus, TopicInfo
from brook.wire.core import PARTITION_KEY_PATTERN, Count, In, Offset, Out, Positive

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

    def returned(self) -> TopicInfo:
        return self.info()

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

    @classmethod
    def of(cls, infos: list[TopicInfo]) -> Topics:
        return cls(topics=[TopicOut.of(info) for info in infos])

    def returned(self) -> list[TopicInfo]:
        return [t.info() for t in self.topics]


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

    @classmethod
    def of(cls, statuses: list[LakeStatus]) -> Lake:
        return msgspec.convert({"topics": statuses}, cls, from_attributes=True)

    def returned(self) -> list[LakeStatus]:
        return msgspec.convert(self.topics, list[LakeStatus], from_attributes=True)


class LakeSyncIn(In):
    """What to write to the lake now: one topic, or every topic."""

    topic: Name | None = None

    @classmethod
    def of_arguments(cls, **arguments: Any) -> LakeSyncIn:
        topic = arguments.get("topic")
        return cls(topic=None if topic is None else validate.topic_name(topic))


class Deleted(Out):
    """The answer to a DELETE: the server names what its path named (server/adapter.py);
    the client's call returns nothing."""

    deleted: str

    def returned(self) -> None:
        return None


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


# ---------------------------------------------------------------- staged writes


class PublishIn(In):
    parts: dict[Id, Annotated[int, Meta(ge=0, le=limits.staging_chunks_per_part_max)]]
    """Part id -> how many chunks it staged."""


class Staged(Out):
    staged: bool
    """False when seq was published already."""


class Dropped(Out):
    dropped: bool
