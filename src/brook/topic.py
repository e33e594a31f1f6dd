"""A handle on one topic of an embedded broker: append and read."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from brook import limits, validate
from brook.codec.batch import ClientBatches, Columns
from brook.commit import AppendRequest, Waiter
from brook.errors import BadRequest, BrookError, PartitionNotFound
from brook.partitioner import partition_for_key
from brook.records import Ack, Published, Record

if TYPE_CHECKING:
    from brook.broker import Broker, TopicState


def route(
    state: TopicState, columns: Columns | ClientBatches, partition: int | None = None
) -> list[tuple[int, list[int], Columns | ClientBatches]]:
    """Split records by partition: (partition, their indexes in `columns`, their records).

    With a `partition`, all of them go there (PartitionNotFound if the topic has
    no such partition). Otherwise keyed records go to their key's partition;
    unkeyed ones all go to one partition chosen round-robin per call, so they
    stay one batch. A client's batches stay as they are unless their keys send
    them to several partitions.
    """
    partitions = state.config.partitions
    if partition is not None:
        if partition >= partitions:
            raise PartitionNotFound(f"topic {state.name} has no partition {partition}")
        return [(partition, list(range(len(columns))), columns)]
    unkeyed = state.spread.next(partitions)
    if isinstance(columns, ClientBatches):
        if partitions == 1 or not columns.keyed:
            return [(unkeyed, list(range(len(columns))), columns)]
        bytes_ = columns.bytes
        columns = columns.columns()
        columns.bytes = bytes_
    if columns.keys is None or partitions == 1:
        return [(unkeyed, list(range(len(columns))), columns)]
    by_partition: dict[int, list[int]] = {}
    for i, key in enumerate(columns.keys):
        p = unkeyed if key is None else partition_for_key(key, partitions)
        by_partition.setdefault(p, []).append(i)
    if len(by_partition) == 1:
        return [(p, indexes, columns) for p, indexes in by_partition.items()]
    return [(p, indexes, columns.select(indexes)) for p, indexes in by_partition.items()]


def acks_in_order(count: int, answered: list[tuple[list[int], AppendRequest]]) -> list[Ack]:
    """The acks of records routed to several partitions, back in input order, once
    every request is answered; raises the first failure (other partitions' records
    may have been appended)."""
    acks: list[Ack] = [Ack(0, 0, 0)] * count
    error: BaseException | None = None
    for indexes, request in answered:
        try:
            for i, ack in zip(indexes, request.result(), strict=True):
                acks[i] = ack
        except BrookError as exc:
            error = error or exc
    if error is not None:
        raise error
    return acks


class Topic:
    """`b.topic(name)`: appends create the topic with defaults; reads need it to exist."""

    def __init__(self, broker: Broker, name: str) -> None:
        self._broker = broker
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
        columns = validate.one(value, key, headers, idempotency_key)
        state = self._broker.topic_state(self.name, create=True)
        partition = self._partition(state, columns.keys[0] if columns.keys else None)
        return self._broker.committer.append(AppendRequest(state.logs[partition], columns))[0]

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
        columns = validate.records(records)
        count = len(columns)
        if not count:
            return []
        if idempotency_keys is not None:
            if len(idempotency_keys) != count:
                raise BadRequest("idempotency_keys must have one entry per record")
            keys = [validate.idempotency_key(k) for k in idempotency_keys]
            columns.idempotency = None if keys.count(None) == count else keys
        state = self._broker.topic_state(self.name, create=True)
        routes = route(state, columns, partition)
        if len(routes) == 1:
            return self._broker.committer.append(AppendRequest(state.logs[routes[0][0]], columns))
        requests = []
        for p, indexes, part in routes:
            request = AppendRequest(state.logs[p], part, Waiter())
            self._broker.committer.submit(request)
            requests.append((indexes, request))
        for _, request in requests:
            assert isinstance(request.on_done, Waiter)
            request.on_done.wait()
        return acks_in_order(count, requests)

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
        columns = validate.records(records)
        return self._broker.staging.stage(self.name, writer, seq, part, chunk, columns, partition)

    def publish(self, writer: str, seq: int, parts: dict[str, int]) -> Published:
        """Append the records staged for `seq` in `parts` (part id -> chunk count),
        exactly once: a publish repeated, resumed after a crash, or replayed with
        other parts appends nothing more. Raises BadRequest for a chunk never staged."""
        return self._broker.staging.publish(self.name, writer, seq, parts)

    def drop_staged(self, writer: str, seq: int) -> bool:
        """Drop what was staged for `seq` (a write that failed); False if it was published."""
        return self._broker.staging.abort(self.name, writer, seq)

    def _partition(self, state: TopicState, key: bytes | None) -> int:
        partitions = state.config.partitions
        if key is None:
            return state.spread.next(partitions)
        return partition_for_key(key, partitions)

    def read(self, partition: int = 0, offset: int = 0, limit: int = 1000) -> list[Record]:
        """Durable records of `partition` at offsets >= `offset`, in order.

        `limit` is capped at read_records_max. An offset below the oldest
        retained one reads from the oldest retained. Raises TopicNotFound,
        BadRequest (unknown partition, negative offset or limit), CorruptData.
        """
        state = self._broker.topic_state(self.name)
        partition = self._check_partition(state, partition)
        offset = validate.whole(offset, "offset")
        limit = min(validate.whole(limit, "limit"), limits.read_records_max)
        return state.logs[partition].read(offset, limit)

    def end_offsets(self) -> dict[int, int]:
        """The next offset of each partition (the count of records ever appended)."""
        state = self._broker.topic_state(self.name)
        return {p.partition: p.durable_offset for p in state.logs}

    def start_offsets(self) -> dict[int, int]:
        """The oldest retained offset of each partition."""
        state = self._broker.topic_state(self.name)
        return {p.partition: p.start_offset for p in state.logs}

    def _check_partition(self, state: TopicState, partition: Any) -> int:
        number = validate.whole(partition, "partition")
        if number >= state.config.partitions:
            raise PartitionNotFound(f"topic {self.name} has no partition {number}")
        return number
