"""A handle on one topic of an embedded broker: append, read, stage and publish."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from brook import limits, validate
from brook.codec.batch import Columns
from brook.core import Core, TopicState
from brook.partitioner import partition_for_key
from brook.records import Ack, Published, Record

if TYPE_CHECKING:
    from brook.staging.service import StagingService


class Topic:
    """`b.topic(name)`: appends create the topic with defaults; reads need it to exist."""

    EMBEDDED_ONLY = frozenset({"stage_checked", "read_page", "read_batches"})
    """For the server: records it decoded already, and reads answered as they are stored."""

    def __init__(self, core: Core, staging: StagingService, name: str) -> None:
        self._core = core
        self._staging = staging
        self.name = name

    def __repr__(self) -> str:
        return f"<Topic {self.name}>"

    def append(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
        idempotency_key: bytes | str | None = None,
    ) -> Ack:
        """Append one record; returns once it is durable.

        With an `idempotency_key` seen on this topic within the window, nothing is
        appended and the first append's ack is returned. Raises BadRequest,
        RecordTooLarge, StorageError (nothing was acknowledged).
        """
        columns = validate.one(
            value, key, headers, idempotency_key, record_bytes_max=self._core.record_bytes_max
        )
        state = self._core.topic_state(self.name, create=True)
        partition = self._partition(state, columns.keys[0] if columns.keys else None)
        return self._core.append_to(state.logs[partition], columns)[0]

    def append_many(
        self,
        records: Iterable[Record],
        idempotency_keys: Sequence[bytes | str | None] | None = None,
        partition: int | None = None,
    ) -> list[Ack]:
        """Append records as one durable batch per partition; acks in input order.

        With a `partition`, every record goes there (raises PartitionNotFound if
        the topic has none such). Otherwise keyed records go to their key's
        partition; unkeyed ones all go to one partition chosen round-robin per
        call. Returns once every record is durable. If any partition's batch
        fails, raises its error (batches of other partitions may have been appended).
        """
        if partition is not None:
            validate.whole(partition, "partition")
        columns = validate.records(
            records, idempotency_keys, record_bytes_max=self._core.record_bytes_max
        )
        if not len(columns):
            return []
        return self._core.append(self.name, columns, partition)

    def stage(
        self,
        writer: str,
        seq: int,
        part: str,
        chunk: int,
        records: Iterable[Record],
        partition: int | None = None,
    ) -> bool:
        """Stage `records` as chunk `chunk` of `part` for `writer`'s publish number
        `seq` (durable on return; nothing is readable until the publish). Staging a
        chunk again replaces it. False when `seq` was published already: nothing is
        kept. With a `partition` the records go there, else by key. See
        docs/GUARANTEES.md, "Staged writes"."""
        columns = validate.records(records, record_bytes_max=self._core.record_bytes_max)
        return self._staging.stage(self.name, writer, seq, part, chunk, columns, partition)

    def stage_checked(
        self,
        writer: str,
        seq: int,
        part: str,
        chunk: int,
        records: Columns | bytes,
        partition: int | None = None,
    ) -> bool:
        """`stage` for records a shell has decoded already (Columns), or a client's
        binary batches as sent (checked here, and kept as they are)."""
        return self._staging.stage(self.name, writer, seq, part, chunk, records, partition)

    def publish(self, writer: str, seq: int, parts: dict[str, int]) -> Published:
        """Append the records staged for `seq` in `parts` (part id -> chunk count),
        exactly once: a publish repeated, resumed after a crash, or replayed with
        other parts appends nothing more. Raises BadRequest for a chunk never staged."""
        return self._staging.publish(self.name, writer, seq, parts)

    def drop_staged(self, writer: str, seq: int) -> bool:
        """Drop what was staged for `seq` (a write that failed); False if it was published."""
        return self._staging.abort(self.name, writer, seq)

    def _partition(self, state: TopicState, key: bytes | None) -> int:
        partitions = state.config.partitions
        if key is None:
            return state.spread.next(partitions)
        return partition_for_key(key, partitions)

    def read(
        self, partition: int = 0, offset: int = 0, limit: int = limits.read_records_default
    ) -> list[Record]:
        """Durable records of `partition` at offsets >= `offset`, in order.

        `limit` is capped at read_records_max. An offset below the oldest
        retained one reads from the oldest retained. Raises TopicNotFound,
        PartitionNotFound, BadRequest (negative offset, limit below 1), CorruptData.
        """
        state = self._core.topic_state(self.name)
        partition_log = state.log(validate.whole(partition, "partition"))
        offset = validate.whole(offset, "offset")
        limit = min(validate.whole(limit, "limit", 1), limits.read_records_max)
        return partition_log.read(offset, limit)

    def read_page(
        self, partition: int = 0, offset: int = 0, limit: int = limits.read_records_default
    ) -> tuple[list[Record], int]:
        """`read`, and the offset to read from next: after the last record read, or
        where the records begin (the oldest retained) when none were there."""
        records = self.read(partition, offset, limit)
        if records:
            return records, records[-1].offset + 1
        start = self._core.topic_state(self.name).log(partition).start_offset
        return records, max(offset, start)

    def read_batches(self, partition: int, offset: int, limit: int) -> tuple[bytes, int]:
        """The stored batches holding records from `offset` (about `limit` of them),
        checksums verified, undecoded (docs/PROTOCOL.md); and the offset to read next."""
        state = self._core.topic_state(self.name)
        partition_log = state.log(validate.whole(partition, "partition"))
        offset = validate.whole(offset, "offset")
        limit = min(validate.whole(limit, "limit", 1), limits.read_records_max)
        return partition_log.read_batches(offset, limit)

    def end_offsets(self) -> dict[int, int]:
        """The next offset of each partition (the count of records ever appended)."""
        state = self._core.topic_state(self.name)
        return {p.partition: p.durable_offset for p in state.logs}

    def start_offsets(self) -> dict[int, int]:
        """The oldest retained offset of each partition."""
        state = self._core.topic_state(self.name)
        return {p.partition: p.start_offset for p in state.logs}
