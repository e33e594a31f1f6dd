# Made from client/aio_handles.py by scripts/unasync.py: run `make generate` after changing that.
"""The handles of the async client (`RemoteBroker.topic`, `.consumer`, `.queue`,
`.endpoint`), as coroutines: the same methods as the embedded broker's handles, each a
call of the broker they came from. The sync client's (this file) are made from
client/aio_handles.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from brook import limits, validate
from brook.client import protocol
from brook.client.sync_calls import RemoteEndpointCalls, RemoteQueueCalls
from brook.models import (
    JobInfo,
)
from brook.records import (
    Ack,
    Job,
    Published,
    Record,
)

if TYPE_CHECKING:
    from brook.client.sync import RemoteBroker


class RemoteTopic:
    def __init__(self, broker: RemoteBroker, name: str) -> None:
        self._broker = broker
        self.name = name

    def append(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
        idempotency_key: bytes | str | None = None,
    ) -> Ack:
        acks: list[Ack] = self._broker._do(
            protocol.append(self.name, value, key, headers, idempotency_key)
        )
        return acks[0]

    def append_many(
        self,
        records: Iterable[Record],
        idempotency_keys: Sequence[bytes | str | None] | None = None,
        partition: int | None = None,
    ) -> list[Ack]:
        items = list(records)
        if not items:
            return []
        acks: list[Ack] = self._broker._do(
            protocol.append_many(self.name, items, idempotency_keys, partition)
        )
        return acks

    def read(
        self, partition: int = 0, offset: int = 0, limit: int = limits.read_records_default
    ) -> list[Record]:
        records: list[Record] = self._broker._do(protocol.read(self.name, partition, offset, limit))
        return records

    def end_offsets(self) -> dict[int, int]:
        offsets: dict[int, int] = self._broker._do(protocol.end_offsets(self.name))
        return offsets

    def start_offsets(self) -> dict[int, int]:
        """The oldest retained offset of each partition."""
        offsets: dict[int, int] = self._broker._do(protocol.start_offsets(self.name))
        return offsets

    def stage(
        self,
        writer: str,
        seq: int,
        part: str,
        chunk: int,
        records: Iterable[Record],
        partition: int | None = None,
    ) -> bool:
        staged: bool = self._broker._do(
            protocol.stage(self.name, writer, seq, part, chunk, list(records), partition)
        )
        return staged

    def publish(self, writer: str, seq: int, parts: dict[str, int]) -> Published:
        published: Published = self._broker._do(protocol.publish(self.name, writer, seq, parts))
        return published

    def drop_staged(self, writer: str, seq: int) -> bool:
        dropped: bool = self._broker._do(protocol.drop_staged(self.name, writer, seq))
        return dropped

    def __repr__(self) -> str:
        return f"<RemoteTopic {self.name}>"


class RemoteConsumer:
    def __init__(self, broker: RemoteBroker, topic: str, group: str, start: str) -> None:
        self._broker = broker
        self.topic = topic
        self.group = group
        self._start = start

    def poll(
        self,
        max_records: int = limits.poll_records_default,
        timeout: float = limits.poll_wait_s_default,
    ) -> list[Record]:
        records: list[Record] = self._broker._do(
            protocol.poll(self.topic, self.group, self._start, max_records, timeout)
        )
        return records

    def commit(self, offsets: dict[int, int] | None = None) -> None:
        self._broker._do(protocol.commit(self.topic, self.group, self._start, offsets))

    def seek(self, partition: int, offset: int) -> None:
        self._broker._do(protocol.seek(self.topic, self.group, self._start, partition, offset))

    def position(self) -> dict[int, int]:
        return self._state()["positions"]

    def committed(self) -> dict[int, int]:
        return self._state()["committed"]

    def lag(self) -> dict[int, int]:
        return self._state()["lag"]

    def _state(self) -> dict[str, dict[int, int]]:
        state: dict[str, dict[int, int]] = self._broker._do(
            protocol.group(self.topic, self.group, self._start)
        )
        return state

    def close(self) -> None:
        """Consumers hold no resources of their own; provided for symmetry."""

    def __repr__(self) -> str:
        return f"<RemoteConsumer {self.topic} group={self.group}>"


class RemoteQueue(RemoteQueueCalls):
    """A queue group over HTTP; the same methods as the embedded `Queue`."""

    def __init__(self, broker: RemoteBroker, topic: str, group: str) -> None:
        self._broker = broker
        self.topic = topic
        self.group = group

    def lease(
        self,
        max_records: int = limits.lease_records_default,
        timeout: float = limits.poll_wait_s_default,
        visibility_timeout_ms: int | None = None,
    ) -> list[Job]:
        jobs: list[Job] = self._broker._do(
            protocol.lease(self.topic, self.group, max_records, timeout, visibility_timeout_ms)
        )
        return jobs

    def _settle(self, action: str, jobs: Any, **fields: Any) -> None:
        receipts = validate.receipts(jobs)
        if not receipts:
            return  # nothing to settle: as the embedded library, no call at all
        self._broker._do(protocol.settle(self.topic, self.group, action, receipts, **fields))

    def ack(self, jobs: Any, results: Sequence[bytes | None] | None = None) -> None:
        if results is None:
            self._settle("ack", jobs)
            return
        checked = validate.results(results, len(validate.receipts(jobs)))
        self._settle("ack", jobs, results_b64=checked)

    def job(self, partition: int, offset: int, timeout: float = 0.0) -> JobInfo:
        info: JobInfo = self._broker._do(
            protocol.job(self.topic, self.group, partition, offset, timeout)
        )
        return info

    def nack(self, jobs: Any, delay_ms: int | None = None, reason: str = "") -> None:
        self._settle("nack", jobs, delay_ms=delay_ms, reason=validate.reason(reason))

    def release(self, jobs: Any, delay_ms: int | None = None, reason: str = "") -> None:
        self._settle("release", jobs, delay_ms=delay_ms, reason=validate.reason(reason))

    def extend(self, jobs: Any, ms: int) -> None:
        self._settle("extend", jobs, ms=validate.whole(ms, "ms", 1))

    def discard(self, jobs: Any, reason: str = "") -> None:
        self._settle("discard", jobs, reason=validate.reason(reason))

    def stats(self) -> dict[str, int]:
        stats: dict[str, int] = self._broker._do(
            protocol.queue_state(self.topic, self.group, "stats")
        )
        return stats

    def settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = self._broker._do(
            protocol.queue_state(self.topic, self.group, "settings")
        )
        return settings

    def __repr__(self) -> str:
        return f"<RemoteQueue {self.topic} group={self.group}>"


class RemoteEndpoint(RemoteEndpointCalls):
    """A delivery endpoint over HTTP; the same methods as the embedded
    one's handle."""

    def __init__(self, broker: RemoteBroker, name: str) -> None:
        self._broker = broker
        self.name = name

    def __repr__(self) -> str:
        return f"<RemoteEndpoint {self.name}>"
