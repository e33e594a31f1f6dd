"""`brook.connect_async(url)`: the broker's API over HTTP, as coroutines.

The same methods as RemoteBroker (client/sync.py), awaited; the requests and
their parsing are shared in client/protocol.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any

import httpx

from brook.client import protocol, transport
from brook.client.protocol import Call
from brook.client.transport import headers_for
from brook.records import Ack, Record, TopicInfo


class AsyncBroker:
    """A broker reached over HTTP from asyncio code. Use `brook.connect_async`."""

    def __init__(
        self, url: str, api_key: str | None = None, timeout: float = 60.0, verify: Any = True
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers_for(api_key), timeout=timeout, verify=verify
        )

    async def _do(self, call: Call) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(**transport.request_args(call))
            except httpx.HTTPError as exc:
                await asyncio.sleep(transport.resend_after(self.url, call, attempt, exc))
                continue
            return transport.answer(call, response)

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        compaction: bool = False,
    ) -> TopicInfo:
        protocol.check_names(name)
        result: TopicInfo = await self._do(
            protocol.create_topic(name, partitions, retention_ms, retention_bytes, compaction)
        )
        return result

    async def topics(self) -> list[TopicInfo]:
        result: list[TopicInfo] = await self._do(protocol.topics())
        return result

    async def delete_topic(self, name: str) -> None:
        protocol.check_names(name)
        await self._do(protocol.delete_topic(name))

    def topic(self, name: str) -> AsyncTopic:
        protocol.check_names(name)
        return AsyncTopic(self, name)

    async def consumer(self, topic: str, group: str, start: str = "earliest") -> AsyncConsumer:
        protocol.check_names(topic, group)
        consumer = AsyncConsumer(self, topic, group, protocol.check_start(start))
        await consumer.lag()
        return consumer

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncBroker:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


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
    ) -> list[Ack]:
        items = list(records)
        if not items:
            return []
        acks: list[Ack] = await self._broker._do(
            protocol.append_many(self.name, items, idempotency_keys)
        )
        return acks

    async def read(self, partition: int = 0, offset: int = 0, limit: int = 1000) -> list[Record]:
        records: list[Record] = await self._broker._do(
            protocol.read(self.name, partition, offset, limit)
        )
        return records

    async def end_offsets(self) -> dict[int, int]:
        offsets: dict[int, int] = await self._broker._do(protocol.end_offsets(self.name))
        return offsets

    async def start_offsets(self) -> dict[int, int]:
        offsets: dict[int, int] = await self._broker._do(protocol.start_offsets(self.name))
        return offsets


class AsyncConsumer:
    def __init__(self, broker: AsyncBroker, topic: str, group: str, start: str) -> None:
        self._broker = broker
        self.topic = topic
        self.group = group
        self._start = start

    async def poll(self, max_records: int = 500, timeout: float = 1.0) -> list[Record]:
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
