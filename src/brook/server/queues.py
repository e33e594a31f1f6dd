"""The HTTP endpoints of queue groups (SPEC §4, docs/PROTOCOL.md).

Calls that change a group wait for the status log to be durable, so they run
on a pool of threads of their own, never on the event loop; a lease long-polls
on the loop first and takes the pool only once there may be something to lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from brook import limits, validate, wire
from brook.api import QueueApi as Queue
from brook.models import Job, Record
from brook.operations import OPERATIONS
from brook.server import adapter
from brook.server.http import Request, Response, json_response
from brook.wire import BATCH_TYPE, decode_request

if TYPE_CHECKING:
    from brook.server.api import Api


def jobs_to_batches(jobs: list[Job]) -> tuple[bytes, str]:
    """Leased records as binary batches (docs/PROTOCOL.md), one per run of records
    with consecutive offsets of one partition and one timestamp; and the
    `brook-jobs` header: JSON [[partition, attempt, receipt], ...] in the same order."""
    parts: list[bytes] = []
    run: list[Record] = []
    for job in jobs:
        record = job.record
        if run and not (
            record.partition == run[-1].partition
            and record.offset == run[-1].offset + 1
            and record.timestamp == run[0].timestamp
        ):
            parts.extend(wire.encode_batch(run[0].offset, run[0].timestamp, run))
            run = []
        run.append(record)
    if run:
        parts.extend(wire.encode_batch(run[0].offset, run[0].timestamp, run))
    meta = wire.encode([[j.record.partition, j.attempt, j.receipt] for j in jobs]).decode()
    return b"".join(parts), meta


def job_out(job: Job) -> wire.JobOut:
    record = wire.RecordOut.of(job.record)
    return wire.JobOut(**msgspec.structs.asdict(record), attempt=job.attempt, receipt=job.receipt)


class QueueEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        serve = api.router.serve
        serve(OPERATIONS["put_queue"], self.put)
        serve(OPERATIONS["describe_queue"], self.get)
        serve(OPERATIONS["lease"], self.lease)
        for action in ("ack", "nack", "release", "extend", "discard"):
            serve(OPERATIONS[action], self._settler(action))
        serve(OPERATIONS["job"], self.job)

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A call that waits for the status log: on the call threads (executor "blocking")."""
        return await self.api.run("blocking", fn, *args, **kwargs)

    async def existing(self, request: Request, path: dict[str, str]) -> Queue:
        """The queue group the path names, which must exist (the table's `queue.` calls)."""
        return await self._queue(request, path["topic"], path["group"])

    async def _queue(
        self, request: Request, topic: str, group: str, create: str = "", **settings: Any
    ) -> Queue:
        """The group, which must exist unless `create` says what may be created: "group"
        (on an existing topic: a lease) or "topic" (a PUT: the topic too, when the
        caller's key may create topics). A look never creates anything."""
        broker = self.api.broker
        existing = broker.find_queue(topic, group)
        if existing is not None and not any(v is not None for v in settings.values()):
            return existing
        if create != "topic" or not _may_create_topics(request):
            broker.topic_info(validate.topic_name(topic))  # TopicNotFound
        queue: Queue = await self.run(broker.queue, topic, group, create=bool(create), **settings)
        return queue

    def _described(self, queue: Queue) -> wire.QueueOut:
        return wire.QueueOut(
            topic=queue.topic,
            group=queue.group,
            settings=msgspec.convert(queue.settings(), wire.QueueSettingsOut),
            stats=queue.stats(),
        )

    async def put(self, request: Request, topic: str, group: str) -> Response:
        settings = decode_request(request.body, wire.QueueSettingsIn, empty_ok=True)
        asked = adapter.arguments(OPERATIONS["put_queue"].query, request.query)
        create = "topic" if asked["create"] else ""
        queue = await self._queue(request, topic, group, create, **settings.given())
        return json_response(await self.run(self._described, queue))

    async def get(self, request: Request, topic: str, group: str) -> Response:
        queue = await self._queue(request, topic, group)
        return json_response(await self.run(self._described, queue))

    async def lease(self, request: Request, topic: str, group: str) -> Response:
        asked = decode_request(request.body, wire.LeaseIn, empty_ok=True)
        max_records, visibility = asked.max_records, asked.visibility_timeout_ms
        wait_ms = min(asked.wait_ms, limits.wait_ms_max)
        queue = await self._queue(request, topic, group, "group")
        deadline = time.monotonic() + wait_ms / 1000
        wait_for_work = self.api.bridge.wait_for_work
        while True:
            jobs = await self.run(queue.lease, max_records, 0, visibility)
            if jobs or not await wait_for_work(queue.topic, queue.group, deadline):
                break
        if BATCH_TYPE in request.headers.get("accept", ""):
            body, meta = jobs_to_batches(jobs)
            return Response(200, body, BATCH_TYPE, [("brook-jobs", meta)])
        return json_response(wire.Jobs(jobs=[job_out(job) for job in jobs]))

    def _settler(self, action: str) -> Callable[..., Any]:
        shapes: dict[str, type[wire.In]] = {
            "ack": wire.AckIn,
            "nack": wire.NackIn,
            "release": wire.NackIn,
            "extend": wire.ExtendIn,
        }
        shape = shapes.get(action, wire.SettleIn)

        async def settle(request: Request, topic: str, group: str) -> Response:
            body: Any = decode_request(request.body, shape)
            receipts = body.receipts
            queue = await self._queue(request, topic, group)
            if action == "release":
                await self.run(queue.release, receipts, body.delay_ms, body.reason)
            elif isinstance(body, wire.NackIn):
                await self.run(queue.nack, receipts, body.delay_ms, body.reason)
            elif isinstance(body, wire.ExtendIn):
                await self.run(queue.extend, receipts, body.ms)
            elif isinstance(body, wire.AckIn):
                await self.run(queue.ack, receipts, body.results_b64)
            else:
                await self.run(queue.discard, receipts, body.reason)
            return json_response(wire.Settled(settled=len(receipts)))

        return settle

    async def job(self, request: Request, topic: str, group: str) -> Response:
        queue = await self._queue(request, topic, group)
        asked = adapter.arguments(OPERATIONS["job"].query, request.query)
        partition, offset, wait_ms = asked["partition"], asked["offset"], asked["wait_ms"]
        info = await self.run(queue.job, partition, offset)  # (its errors before a wait)
        if wait_ms and info.state != "unknown":
            # Finished only once durable: the state alone may show an ack in flight.
            deadline = time.monotonic() + wait_ms / 1000
            await self.api.bridge.wait_for_job(topic, group, partition, offset, deadline)
            info = await self.run(queue.job, partition, offset)
        return json_response(wire.JobInfoOut.of(info))


def _may_create_topics(request: Request) -> bool:
    """Without keys anyone may; with keys, those that may append (which creates
    topics) or administer."""
    key = request.key
    return key is None or "produce" in key.scopes or "admin" in key.scopes
