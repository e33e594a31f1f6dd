"""The coroutine forms of an app's calls that wait on the broker: `enqueue_async`,
`enqueue_many_async` and `result_async`, for code on an event loop (FastAPI,
aiohttp), which must not block it for the durable write an enqueue waits for.

Against a `brook serve` URL they use the async HTTP client (one per event loop: an
httpx client belongs to the loop it was made on). An embedded broker has no
coroutine API: its calls run in a thread (`asyncio.to_thread`), the loop free meanwhile.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from brook import limits
from brook.errors import DataLoss, NotFound
from brook.models import Record
from brook.tasks import results

if TYPE_CHECKING:
    from brook.client import AsyncBroker
    from brook.tasks.app import App
    from brook.tasks.refs import EnqueueOptions, JobRef


class AsyncSide:
    """An app's async calls; made by the app on first use."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncBroker] = (
            weakref.WeakKeyDictionary()
        )

    def _client(self) -> AsyncBroker:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            import brook

            client = brook.connect_async(self.app.location, api_key=self.app.api_key)
            self._clients[loop] = client
        return client

    async def append(self, topic: str, record: Record, options: EnqueueOptions) -> JobRef:
        """`App._append`, awaited."""
        from brook.tasks.refs import JobRef

        if not self.app.remote:
            return await asyncio.to_thread(
                self.app._append_record, topic, record, options.idempotency_key
            )
        ack = (
            await self._client()
            .topic(topic)
            .append(
                record.value,
                key=record.key,
                headers=record.headers,
                idempotency_key=options.idempotency_key,
            )
        )
        ref = JobRef(topic, ack.partition, ack.offset)
        if options.idempotency_key is not None:  # rare: read back, in a thread
            await asyncio.to_thread(
                self.app._check_same_job, ref, record.value, record.key, options.idempotency_key
            )
        return ref

    async def append_many(self, topic: str, records: Sequence[Record]) -> list[JobRef]:
        """`App._enqueue_many`'s append, awaited."""
        from brook.tasks.refs import JobRef

        if not self.app.remote:
            acks = await asyncio.to_thread(self.app._topic(topic).append_many, list(records))
        else:
            acks = await self._client().topic(topic).append_many(list(records))
        return [JobRef(topic, ack.partition, ack.offset) for ack in acks]

    async def result(self, ref: JobRef, timeout: float | None) -> Any:
        """`App.result`, awaited: the same long-poll, on the async client."""
        if not self.app.remote:
            return await asyncio.to_thread(self.app.result, ref, timeout)
        client = self._client()
        deadline = None if timeout is None else time.monotonic() + timeout
        if ref.join is not None:
            looked = False
            while True:
                remaining = results.next_wait_s(ref, deadline, timeout, results.WAITING, looked)
                looked = True
                found = results.placed(ref, await client.join(ref.join, remaining))
                if found is not None:
                    ref = found
                    break
        queue = None
        state = "pending"
        looked = False
        while True:
            remaining = results.next_wait_s(ref, deadline, timeout, state, looked)
            looked = True
            if queue is None:
                try:
                    queue = await client.queue(ref.topic, results.GROUP, create=False)
                except NotFound:
                    if not await self._exists(client, ref):
                        raise NotFound(f"no job {ref}: its topic has no record there") from None
                    await asyncio.sleep(min(remaining, limits.result_unclaimed_pause_s))
                    continue
            info = await queue.job(ref.partition, ref.offset, timeout=remaining)
            state = info.state
            if state in ("acked", "dead", "unknown"):
                return results.outcome(ref, state, info.error, info.result)

    @staticmethod
    async def _exists(client: AsyncBroker, ref: JobRef) -> bool:
        try:
            records = await client.topic(ref.topic).read(ref.partition, ref.offset, limit=1)
        except (NotFound, DataLoss):
            return False
        return any(r.offset == ref.offset for r in records)

    async def close(self) -> None:
        """Close this loop's client (the app's `aclose`)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.close()
