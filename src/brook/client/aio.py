"""`brook.connect_async(url)`: the broker's API over HTTP, as coroutines.

The same methods and types as the embedded broker for everything the server
serves. One httpx connection pool is reused for every call; calls that are safe
to resend (client/protocol.py) are retried on connection errors with backoff.
The sync client (client/sync.py, `brook.connect`) is made from this file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx

from brook import limits, validate
from brook.client import protocol, transport
from brook.client.aio_calls import AsyncBrokerCalls
from brook.client.aio_handles import AsyncConsumer, AsyncEndpoint, AsyncQueue, AsyncTopic
from brook.client.protocol import Call
from brook.client.transport import headers_for
from brook.errors import BadRequest, ScheduleNotFound, TimerNotCancellable, TimerNotFound
from brook.models import (
    Backoff,
    TimerInfo,
    TimerSpec,
)
from brook.records import (
    JoinInfo,
    JoinSpec,
)

T = TypeVar("T")


class AsyncBroker(AsyncBrokerCalls):
    """A broker reached over HTTP, as coroutines. Use `brook.connect_async`."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        timeout: float = limits.client_timeout_s_default,
        verify: Any = True,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers_for(api_key), timeout=timeout, verify=verify
        )

    async def _ask(self, returns: type[T], name: str, *path: str | int, **arguments: Any) -> T:
        """Operation `name` of the table, called as its facade method is (protocol.request);
        what it `returns`."""
        return cast(T, await self._do(protocol.request(name, *path, **arguments)))

    async def _do(self, call: Call) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(**transport.request_args(call))
            except httpx.HTTPError as exc:
                await asyncio.sleep(transport.resend_after(self.url, call, attempt, exc))
                continue
            wait = transport.overloaded_wait(response, attempt)
            if wait is not None:
                await asyncio.sleep(wait)
                continue
            return transport.answer(call, response)

    def topic(self, name: str) -> AsyncTopic:
        protocol.check_names(name)
        return AsyncTopic(self, name)

    async def consumer(self, topic: str, group: str, start: str = "earliest") -> AsyncConsumer:
        protocol.check_names(topic, group)
        consumer = AsyncConsumer(self, topic, group, protocol.check_start(start))
        await consumer.lag()  # the group exists on the server from here on, as it does embedded
        return consumer

    async def queue(
        self,
        topic: str,
        group: str,
        visibility_timeout_ms: int | None = None,
        max_attempts: int | None = None,
        ordering: str | None = None,
        dead_letter_topic: str | None = None,
        backoff: Backoff | dict[str, Any] | None = None,
        expire_after_ms: int | None = None,
        concurrency_per_key: int | None = None,
        key_rate_limit_per_s: float | None = None,
        rate_limit_per_s: float | None = None,
        lower_priority_share: float | None = None,
        create: bool = True,
    ) -> AsyncQueue:
        """Queue group `group` on `topic`, created if new (and the topic); with
        `create=False` an unknown topic or group raises TopicNotFound or GroupNotFound.
        Settings left as None keep the stored ones."""
        await self._do(
            protocol.queue_settings(
                topic,
                group,
                create,
                visibility_timeout_ms=visibility_timeout_ms,
                max_attempts=max_attempts,
                ordering=ordering,
                dead_letter_topic=dead_letter_topic,
                backoff=backoff,
                expire_after_ms=expire_after_ms,
                concurrency_per_key=concurrency_per_key,
                key_rate_limit_per_s=key_rate_limit_per_s,
                rate_limit_per_s=rate_limit_per_s,
                lower_priority_share=lower_priority_share,
            )
        )
        return AsyncQueue(self, topic, group)

    async def schedule(
        self,
        topic: str,
        value: bytes,
        at: int | None = None,
        delay_ms: int | None = None,
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
        timer_id: str | None = None,
    ) -> str:
        """Schedule a record for `topic` at `at` or after `delay_ms`; its timer id."""
        ids = await self.schedule_many(
            [TimerSpec(topic, value, at, delay_ms, key, headers, timer_id)]
        )
        return ids[0]

    async def schedule_many(self, specs: Sequence[TimerSpec]) -> list[str]:
        """Schedule many timers in one request; their ids, in order."""
        if len(specs) > limits.schedule_timers_max:
            raise BadRequest(f"at most {limits.schedule_timers_max} timers per call")
        ids: list[str] = await self._do(protocol.schedule_many(specs))
        return ids

    async def cancel_timer(self, timer_id: str) -> bool:
        """Cancel a pending timer; False if it fired, was cancelled or is unknown."""
        try:
            await self._do(protocol.cancel_timer(validate.timer_id(timer_id)))
        except (TimerNotFound, TimerNotCancellable):
            return False
        return True

    async def timer(self, timer_id: str) -> TimerInfo | None:
        """A timer's state; None if unknown."""
        try:
            info: TimerInfo = await self._do(protocol.timer(validate.timer_id(timer_id)))
        except TimerNotFound:
            return None
        return info

    # ------------------------------------------------------------ delivery

    async def endpoint(self, name: str) -> AsyncEndpoint:
        """A handle on endpoint `name`. Raises EndpointNotFound."""
        await self._do(protocol.request("describe_endpoint", name))
        return AsyncEndpoint(self, name)

    async def create_joins(self, joins: Sequence[JoinSpec]) -> list[JoinInfo]:
        """Make joins (see Broker.create_joins)."""
        made: list[JoinInfo] = await self._do(protocol.create_joins(joins))
        return made

    async def join(self, join_id: str, timeout: float = 0.0) -> JoinInfo:
        """Where a join stands, waiting up to `timeout` (at most wait_ms_max) for its
        end. Raises JoinNotFound."""
        info: JoinInfo = await self._do(protocol.join(join_id, timeout))
        return info

    async def delete_schedule(self, name: str) -> bool:
        """False if there was none."""
        try:
            await self._do(protocol.delete_schedule(name))
        except ScheduleNotFound:
            return False
        return True

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncBroker:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncBroker {self.url}>"
