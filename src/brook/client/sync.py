# Made from client/aio.py by scripts/unasync.py: run `make generate` after changing that.
"""`brook.connect(url)`: the broker's API over HTTP, for threads.

The same methods and types as the embedded broker for everything the server
serves. One httpx connection pool is reused for every call; calls that are safe
to resend (client/protocol.py) are retried on connection errors with backoff.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx

from brook import limits, validate
from brook.client import protocol, transport
from brook.client.protocol import Call
from brook.client.sync_calls import RemoteBrokerCalls
from brook.client.sync_handles import RemoteConsumer, RemoteEndpoint, RemoteQueue, RemoteTopic
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


class RemoteBroker(RemoteBrokerCalls):
    """A broker reached over HTTP. Use `brook.connect`."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        timeout: float = limits.client_timeout_s_default,
        verify: Any = True,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url, headers=headers_for(api_key), timeout=timeout, verify=verify
        )

    def _ask(self, returns: type[T], name: str, *path: str | int, **arguments: Any) -> T:
        """Operation `name` of the table, called as its facade method is (protocol.request);
        what it `returns`."""
        return cast(T, self._do(protocol.request(name, *path, **arguments)))

    def _do(self, call: Call) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(**transport.request_args(call))
            except httpx.HTTPError as exc:
                time.sleep(transport.resend_after(self.url, call, attempt, exc))
                continue
            wait = transport.overloaded_wait(response, attempt)
            if wait is not None:
                time.sleep(wait)
                continue
            return transport.answer(call, response)

    def topic(self, name: str) -> RemoteTopic:
        protocol.check_names(name)
        return RemoteTopic(self, name)

    def consumer(self, topic: str, group: str, start: str = "earliest") -> RemoteConsumer:
        protocol.check_names(topic, group)
        consumer = RemoteConsumer(self, topic, group, protocol.check_start(start))
        consumer.lag()  # the group exists on the server from here on, as it does embedded
        return consumer

    def queue(
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
    ) -> RemoteQueue:
        """Queue group `group` on `topic`, created if new (and the topic); with
        `create=False` an unknown topic or group raises TopicNotFound or GroupNotFound.
        Settings left as None keep the stored ones."""
        self._do(
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
        return RemoteQueue(self, topic, group)

    def schedule(
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
        ids = self.schedule_many([TimerSpec(topic, value, at, delay_ms, key, headers, timer_id)])
        return ids[0]

    def schedule_many(self, specs: Sequence[TimerSpec]) -> list[str]:
        """Schedule many timers in one request; their ids, in order."""
        if len(specs) > limits.schedule_timers_max:
            raise BadRequest(f"at most {limits.schedule_timers_max} timers per call")
        ids: list[str] = self._do(protocol.schedule_many(specs))
        return ids

    def cancel_timer(self, timer_id: str) -> bool:
        """Cancel a pending timer; False if it fired, was cancelled or is unknown."""
        try:
            self._do(protocol.cancel_timer(validate.timer_id(timer_id)))
        except (TimerNotFound, TimerNotCancellable):
            return False
        return True

    def timer(self, timer_id: str) -> TimerInfo | None:
        """A timer's state; None if unknown."""
        try:
            info: TimerInfo = self._do(protocol.timer(validate.timer_id(timer_id)))
        except TimerNotFound:
            return None
        return info

    # ------------------------------------------------------------ delivery

    def endpoint(self, name: str) -> RemoteEndpoint:
        """A handle on endpoint `name`. Raises EndpointNotFound."""
        self._do(protocol.request("describe_endpoint", name))
        return RemoteEndpoint(self, name)

    def create_joins(self, joins: Sequence[JoinSpec]) -> list[JoinInfo]:
        """Make joins (see Broker.create_joins)."""
        made: list[JoinInfo] = self._do(protocol.create_joins(joins))
        return made

    def join(self, join_id: str, timeout: float = 0.0) -> JoinInfo:
        """Where a join stands, waiting up to `timeout` (at most wait_ms_max) for its
        end. Raises JoinNotFound."""
        info: JoinInfo = self._do(protocol.join(join_id, timeout))
        return info

    def delete_schedule(self, name: str) -> bool:
        """False if there was none."""
        try:
            self._do(protocol.delete_schedule(name))
        except ScheduleNotFound:
            return False
        return True

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RemoteBroker:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RemoteBroker {self.url}>"
