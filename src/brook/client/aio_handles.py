"""The handles of the async client (`AsyncBroker.topic`, `.consumer`, `.queue`,
`.endpoint`), as coroutines: the same methods as the embedded broker's handles, each a
call of the broker they came from. The sync client's (client/sync_handles.py) are made
from this file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from brook import limits, validate
from brook.client import protocol
from brook.client.aio_calls import AsyncEndpointCalls, AsyncQueueCalls
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
    from brook.client.aio import AsyncBroker


class AsyncTopic:
    def __init__(self, broker: AsyncBroker, name: str) -> None:
        self._broker = broker
        self.name = name

    async def append(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
        idempotency_key: bytes | str | None = None,
    ) -> Ack:
        acks: list[Ack] = await self._broker._do(
            protocol.append(self.name, value, key, headers, idempotency_key)
        )
        return acks[0]

    async def append_many(
        self,
        records: Iterable[Record],
        idempotency_keys: Sequence[bytes | str | None] | None = None,
        partition: int | None = None,
    ) -> list[Ack]:
        items = list(records)
        if not items:
            return []
        acks: list[Ack] = await self._broker._do(
            protocol.append_many(self.name, items, idempotency_keys, partition)
        )
        return acks

    async def read(
        self, partition: int = 0, offset: int = 0, limit: int = limits.read_records_default
    ) -> list[Record]:
        records: list[Record] = await self._broker._do(
            protocol.read(self.name, partition, offset, limit)
        )
        return records

    async def end_offsets(self) -> dict[int, int]:
        offsets: dict[int, int] = await self._broker._do(protocol.end_offsets(self.name))
        return offsets

    async def start_offsets(self) -> dict[int, int]:
        """The oldest retained offset of each partition."""
        offsets: dict[int, int] = await self._broker._do(protocol.start_offsets(self.name))
        return offsets

    async def stage(
        self,
        writer: str,
        seq: int,
        part: str,
        chunk: int,
        records: Iterable[Record],
        partition: int | None = None,
    ) -> bool:
        staged: bool = await self._broker._do(
            protocol.stage(self.name, writer, seq, part, chunk, list(records), partition)
        )
        return staged

    async def publish(self, writer: str, seq: int, parts: dict[str, int]) -> Published:
        published: Published = await self._broker._do(
            protocol.publish(self.name, writer, seq, parts)
        )
        return published

    async def drop_staged(self, writer: str, seq: int) -> bool:
        dropped: bool = await self._broker._do(protocol.drop_staged(self.name, writer, seq))
        return dropped

    def __repr__(self) -> str:
        return f"<AsyncTopic {self.name}>"


class AsyncConsumer:
    def __init__(self, broker: AsyncBroker, topic: str, group: str, start: str) -> None:
        self._broker = broker
        self.topic = topic
        self.group = group
        self._start = start

    async def poll(
        self,
        max_records: int = limits.poll_records_default,
        timeout: float = limits.poll_wait_s_default,
    ) -> list[Record]:
        records: list[Record] = await self._broker._do(
            protocol.poll(self.topic, self.group, self._start, max_records, timeout)
        )
        return records

    async def commit(self, offsets: dict[int, int] | None = None) -> None:
        await self._broker._do(protocol.commit(self.topic, self.group, self._start, offsets))

    async def seek(self, partition: int, offset: int) -> None:
        await self._broker._do(
            protocol.seek(self.topic, self.group, self._start, partition, offset)
        )

    async def position(self) -> dict[int, int]:
        return (await self._state())["positions"]

    async def committed(self) -> dict[int, int]:
        return (await self._state())["committed"]

    async def lag(self) -> dict[int, int]:
        return (await self._state())["lag"]

    async def _state(self) -> dict[str, dict[int, int]]:
        state: dict[str, dict[int, int]] = await self._broker._do(
            protocol.group(self.topic, self.group, self._start)
        )
        return state

    async def close(self) -> None:
        """Consumers hold no resources of their own; provided for symmetry."""

    def __repr__(self) -> str:
        return f"<AsyncConsumer {self.topic} group={self.group}>"


class AsyncQueue(AsyncQueueCalls):
    """A queue group over HTTP, as coroutines; the same methods as the embedded `Queue`."""

    def __init__(self, broker: AsyncBroker, topic: str, group: str) -> None:
        self._broker = broker
        self.topic = topic
        self.group = group

    async def lease(
        self,
        max_records: int = limits.lease_records_default,
        timeout: float = limits.poll_wait_s_default,
        visibility_timeout_ms: int | None = None,
    ) -> list[Job]:
        jobs: list[Job] = await self._broker._do(
            protocol.lease(self.topic, self.group, max_records, timeout, visibility_timeout_ms)
        )
        return jobs

    async def _settle(self, action: str, jobs: Any, **fields: Any) -> None:
        receipts = validate.receipts(jobs)
        if not receipts:
            return  # nothing to settle: as the embedded library, no call at all
        await self._broker._do(protocol.settle(self.topic, self.group, action, receipts, **fields))

    async def ack(self, jobs: Any, results: Sequence[bytes | None] | None = None) -> None:
        if results is None:
            await self._settle("ack", jobs)
            return
        checked = validate.results(results, len(validate.receipts(jobs)))
        await self._settle("ack", jobs, results_b64=checked)

    async def job(self, partition: int, offset: int, timeout: float = 0.0) -> JobInfo:
        info: JobInfo = await self._broker._do(
            protocol.job(self.topic, self.group, partition, offset, timeout)
        )
        return info

    async def nack(self, jobs: Any, delay_ms: int | None = None, reason: str = "") -> None:
        await self._settle("nack", jobs, delay_ms=delay_ms, reason=validate.reason(reason))

    async def release(self, jobs: Any, delay_ms: int | None = None, reason: str = "") -> None:
        await self._settle("release", jobs, delay_ms=delay_ms, reason=validate.reason(reason))

    async def extend(self, jobs: Any, ms: int) -> None:
        await self._settle("extend", jobs, ms=validate.whole(ms, "ms", 1))

    async def discard(self, jobs: Any, reason: str = "") -> None:
        await self._settle("discard", jobs, reason=validate.reason(reason))

    async def stats(self) -> dict[str, int]:
        stats: dict[str, int] = await self._broker._do(
            protocol.queue_state(self.topic, self.group, "stats")
        )
        return stats

    async def settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = await self._broker._do(
            protocol.queue_state(self.topic, self.group, "settings")
        )
        return settings

    def __repr__(self) -> str:
        return f"<AsyncQueue {self.topic} group={self.group}>"


class AsyncEndpoint(AsyncEndpointCalls):
    """A delivery endpoint over HTTP, as coroutines; the same methods as the embedded
    one's handle."""

    def __init__(self, broker: AsyncBroker, name: str) -> None:
        self._broker = broker
        self.name = name

    def __repr__(self) -> str:
        return f"<AsyncEndpoint {self.name}>"
