"""The HTTP API v1 (SPEC §4, docs/PROTOCOL.md): requests in, broker calls, responses out."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec

from brook import limits, validate, wire
from brook.broker import Broker
from brook.codec.batch import ClientBatches, Columns
from brook.commit import AppendRequest
from brook.core import TopicState, acks_in_order, route
from brook.errors import (
    BadRequest,
    BrookError,
    PartitionNotFound,
    TopicNotFound,
    UnsupportedMediaType,
)
from brook.log.partition import PartitionLog
from brook.records import Ack
from brook.server import openapi, query
from brook.server.auth import Authenticator, may_use
from brook.server.endpoints import EndpointEndpoints
from brook.server.http import Request, Response, error_response, json_response, media_type
from brook.server.metrics import RequestCounts, registry_for, render
from brook.server.queues import QueueEndpoints
from brook.server.router import Router
from brook.server.staging import StagingEndpoints
from brook.server.timers import TimerEndpoints
from brook.server.ui.dashboard import PREFIX as UI_PREFIX
from brook.server.ui.dashboard import Dashboard
from brook.supervisor import Failure
from brook.wire import BATCH_TYPE, JSON_TYPE, RAW_TYPE, RecordOut, TopicOut, decode_request

log = logging.getLogger("brook.server")
_UI_FOLDER = UI_PREFIX + "/"


class Completions:
    """Answers from the committer's threads, handed to the event loop in one wake-up per
    round instead of one per request (each cross-thread wake-up costs a syscall)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._ready: list[tuple[asyncio.Future[AppendRequest], AppendRequest]] = []

    def done(self, future: asyncio.Future[AppendRequest], request: AppendRequest) -> None:
        with self._lock:
            self._ready.append((future, request))
            first = len(self._ready) == 1
        if first:
            self.loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for future, request in ready:
            # The callback refers to the future and the future will refer to the
            # request: a cycle that would keep the request's records in memory
            # until the garbage collector ran. Break it.
            request.on_done = None
            if not future.done():
                future.set_result(request)


class NewRecords:
    """Wakes long-polling requests after each commit round (called from the syncer thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting = 0
        self._event = asyncio.Event()

    def notify_threadsafe(self, topics: frozenset[str] = frozenset()) -> None:
        """A commit round wrote to `topics` (Core.round_listeners): wake the waiters."""
        # Only bother the loop when someone waits; a waiter registers before it
        # reads, so a round published before this check is seen by its read.
        if self.waiting:
            self.loop.call_soon_threadsafe(self.fire)

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, seconds: float) -> None:
        event = self._event
        with contextlib.suppress(TimeoutError):  # the caller checks for data either way
            await asyncio.wait_for(event.wait(), seconds)


class Api:
    def __init__(
        self,
        broker: Broker,
        loop: asyncio.AbstractEventLoop,
        auth: Authenticator,
        where: str = "",
    ) -> None:
        self.broker = broker
        self.core = broker.core
        self.loop = loop
        self.auth = auth
        self.new_records = NewRecords(loop)
        self.completions = Completions(loop)
        self.reads = ThreadPoolExecutor(limits.read_threads, thread_name_prefix="brook-read")
        self.stopping = False
        self.router = Router()
        r = self.router
        r.add("GET", "/v1/health", self.health, None)
        r.add("GET", "/v1/topics", self.list_topics, "any")
        r.add("PUT", "/v1/topics/{topic}", self.put_topic, "admin")
        r.add("GET", "/v1/topics/{topic}", self.get_topic, "any")
        r.add("DELETE", "/v1/topics/{topic}", self.delete_topic, "admin")
        r.add("POST", "/v1/topics/{topic}/records", self.post_records, "produce")
        r.add("GET", "/v1/topics/{topic}/records", self.get_records, "consume")
        r.add("GET", "/v1/topics/{topic}/groups/{group}/poll", self.poll, "consume")
        r.add("POST", "/v1/topics/{topic}/groups/{group}/commit", self.commit, "consume")
        r.add("POST", "/v1/topics/{topic}/groups/{group}/seek", self.seek, "consume")
        r.add("GET", "/v1/topics/{topic}/groups/{group}", self.get_group, "consume")
        self.queues = QueueEndpoints(self)
        self.timers = TimerEndpoints(self)
        self.staging = StagingEndpoints(self)
        self.endpoints = EndpointEndpoints(self)
        r.add("GET", "/metrics", self.metrics, "admin")
        r.add("GET", "/openapi.json", self.openapi, "any")
        self.ui = Dashboard(broker, auth, self._read, where or "its storage")
        self.requests = RequestCounts()
        self.registry = registry_for(broker, self.requests)
        self._query_names = {
            route: tuple(name for name, *_ in operation.query)
            for route, operation in openapi.OPERATIONS.items()
        }

    async def __call__(self, request: Request) -> Response:
        if request.path == UI_PREFIX or request.path.startswith(_UI_FOLDER):
            page = await self.ui(request)  # its own login, errors and pages
            self.requests.add(UI_PREFIX, request.method, page.status)
            return page
        template = "unmatched"
        try:
            try:
                route, params = self.router.match(request.method, request.path)
            except BrookError:
                if self.auth.enabled:  # with keys, only a key holder learns what exists
                    self.auth.identify(request.headers.get("authorization"))
                raise
            template = route.template
            if self.auth.enabled and route.scope is not None:
                request.key = self.auth.check(
                    request.headers.get("authorization"), route.scope, params.get("topic")
                )
            if request.query:
                self._check_query(request, route.template)
            response: Response = await route.handler(request, **params)
        except BrookError as exc:
            response = error_response(exc)
        except Exception:
            # A bug, not bad input and not storage: 500, which clients do not retry blindly.
            log.exception("unexpected error answering %s %s", request.method, request.path)
            response = error_response(BrookError("internal error; see the server log"))
        self.requests.add(template, request.method, response.status)
        return response

    def _check_query(self, request: Request, template: str) -> None:
        """Refuse query parameters the route does not take: a misspelt `?ofset=5` would
        otherwise be ignored and the default used."""
        method = "GET" if request.method == "HEAD" else request.method
        known = self._query_names.get((method, template), ())
        for name in request.query:
            if name not in known:
                takes = f"it takes {', '.join(known)}" if known else "it takes none"
                raise BadRequest(
                    f"unknown query parameter {name!r} for {method} {template}; {takes}"
                )

    # ------------------------------------------------------------ helpers

    async def _read(self, fn: Any, *args: Any) -> Any:
        """Run a read off the loop: storage may be slow (a cold disk, an S3 cache miss
        is a network GET), and the loop must go on answering everyone else."""
        return await self.loop.run_in_executor(self.reads, fn, *args)

    def close(self) -> None:
        """Let the reads in flight finish (the server has stopped taking requests)."""
        self.ui.close()  # its ticker first: it reads through the pool
        self.reads.shutdown(wait=True)
        self.queues.close()

    async def _blocking(self, fn: Any, *args: Any) -> Any:
        """Run a call that may wait for the committer (topic creation, deletion) off the loop."""
        return await self.loop.run_in_executor(None, fn, *args)

    def _state(self, topic: str) -> TopicState:
        if topic.startswith("__"):
            validate.topic_name(topic)  # reserved for Brook's own topics: InvalidName
        return self.core.topic_state(topic)  # checks the name of a topic it does not know

    async def _state_or_create(self, topic: str) -> TopicState:
        try:
            return self._state(topic)
        except TopicNotFound:
            state: TopicState = await self._blocking(
                lambda: self.core.topic_state(topic, create=True)
            )
            return state

    async def _append_routed(
        self,
        count: int,
        state: TopicState,
        routed: list[tuple[int, list[int], Columns | ClientBatches]],
    ) -> list[Ack]:
        """Append records bound for several partitions through the committer; acks in
        input order."""
        futures = [
            (indexes, self._submit(state.logs[partition], part))
            for partition, indexes, part in routed
        ]
        answered = [(indexes, await future) for indexes, future in futures]
        return acks_in_order(count, answered)

    def _submit(
        self, log: PartitionLog, columns: Columns | ClientBatches
    ) -> asyncio.Future[AppendRequest]:
        """Hand records to the committer; the future resolves on the loop once answered."""
        future: asyncio.Future[AppendRequest] = self.loop.create_future()
        done = functools.partial(self.completions.done, future)
        self.core.submit(AppendRequest(log, columns, done))
        return future

    async def _wait(self, deadline: float, has_data: Any) -> bool:
        """Wait until `has_data()` or the deadline (or the server stops); returns has_data()."""
        self.new_records.waiting += 1
        try:
            while not has_data():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.stopping:
                    return False
                await self.new_records.wait(min(remaining, 1.0))
            return True
        finally:
            self.new_records.waiting -= 1

    # ------------------------------------------------------------ endpoints

    async def health(self, request: Request) -> Response:
        """200 while the broker serves; 503 naming every background loop (or task)
        that is failing now, until it works again. Failures of single endpoints or
        queue groups are detail (`isolated`): they do not stop the others."""
        supervisor = self.broker.supervisor
        failing = supervisor.failing()
        isolated = supervisor.isolated()
        health = wire.Health(
            status="failing" if failing else "ok",
            failing=[_failing(f) for f in failing] or None,
            isolated=[_failing(f) for f in isolated[:HEALTH_ISOLATED_MAX]] or None,
            isolated_count=len(isolated),
        )
        return json_response(health, status=503 if failing else 200)

    async def openapi(self, request: Request) -> Response:
        return json_response(openapi.document(self.router, self.auth.enabled))

    async def metrics(self, request: Request) -> Response:
        return Response(200, render(self.registry), "text/plain; version=0.0.4; charset=utf-8")

    async def list_topics(self, request: Request) -> Response:
        topics = self.broker.topics()
        if request.key is not None:
            topics = [t for t in topics if may_use(request.key, t.name)]
        return json_response(wire.Topics(topics=[TopicOut.of(t) for t in topics]))

    async def put_topic(self, request: Request, topic: str) -> Response:
        settings = decode_request(request.body, wire.TopicSettingsIn, empty_ok=True).given()
        info = await self._blocking(lambda: self.broker.create_topic(topic, **settings))
        return json_response(TopicOut.of(info))

    async def get_topic(self, request: Request, topic: str) -> Response:
        state = self._state(topic)
        starts = {p.partition: p.start_offset for p in state.logs}
        fields = msgspec.structs.asdict(state.info())
        return json_response(wire.TopicDetail(**fields, start_offsets=starts))

    async def delete_topic(self, request: Request, topic: str) -> Response:
        await self._blocking(self.broker.delete_topic, topic)
        return json_response(wire.Deleted(deleted=topic))

    async def post_records(self, request: Request, topic: str) -> Response:
        try:
            state: TopicState | None = self._state(topic)
        except TopicNotFound:
            state = None  # created below, once the body has proved sound
        content_type = media_type(request)
        partition = (
            None if "partition" not in request.query else query.number(request.query, "partition")
        )
        columns: Columns | ClientBatches
        if content_type == JSON_TYPE:
            columns = decode_request(request.body, wire.RecordsIn).columns()
            if not len(columns):
                return json_response({"acks": []})
        elif content_type == BATCH_TYPE:
            columns = validate.batch_body(request.body)
            if not len(columns):
                return json_response({"acks": []})
        elif content_type != RAW_TYPE:
            raise UnsupportedMediaType(
                f"send records as {JSON_TYPE}, one raw record as {RAW_TYPE}, or a binary "
                f"batch as {BATCH_TYPE}; not {content_type or 'a body without content-type'}"
            )
        else:
            key = request.query.get("key")
            columns = validate.one(
                request.body,
                None if key is None else key.encode(),
                None,
                request.headers.get("idempotency-key"),
            )
        if state is None:
            state = await self._state_or_create(topic)
        routed = route(state, columns, partition)
        if len(routed) == 1:  # the common case, one coroutine less on every resumption
            only, _, part = routed[0]
            acks = (await self._submit(state.logs[only], part)).result()
        else:
            acks = await self._append_routed(len(columns), state, routed)
        return json_response(wire.Acks(acks=acks))

    async def get_records(self, request: Request, topic: str) -> Response:
        state = self._state(topic)
        params = request.query
        partition = query.number(params, "partition", 0)
        if partition >= state.config.partitions:
            raise PartitionNotFound(f"topic {topic} has no partition {partition}")
        offset = query.number(params, "offset", 0)
        limit = min(query.number(params, "limit", 1000, low=1), limits.read_records_max)
        wait_ms = min(query.number(params, "wait_ms", 0), limits.wait_ms_max)
        partition_log = state.logs[partition]
        if wait_ms:
            await self._wait(
                time.monotonic() + wait_ms / 1000, lambda: partition_log.durable_offset > offset
            )
        if BATCH_TYPE in request.headers.get("accept", ""):
            # Stored batches as they are: no decoding on the server (docs/PROTOCOL.md).
            body, next_offset = await self._read(partition_log.read_batches, offset, limit)
            return Response(200, body, BATCH_TYPE, [("brook-next-offset", str(next_offset))])
        records = await self._read(partition_log.read, offset, limit)
        next_offset = records[-1].offset + 1 if records else max(offset, partition_log.start_offset)
        return json_response(
            wire.RecordPage(records=[RecordOut.of(r) for r in records], next_offset=next_offset)
        )

    def _consumer(self, request: Request, topic: str, group: str) -> Any:
        """The group's consumer; `?start=latest` places a group new to the broker at the end."""
        start = request.query.get("start", "earliest")
        return self.broker.consumer(topic, group, start)

    async def poll(self, request: Request, topic: str, group: str) -> Response:
        consumer = self._consumer(request, topic, group)
        params = request.query
        max_records = min(
            query.number(params, "max_records", limits.poll_records_default, low=1),
            limits.read_records_max,
        )
        wait_ms = min(query.number(params, "wait_ms", 0), limits.wait_ms_max)
        records = await self._read(consumer.poll, max_records, 0)
        if not records and wait_ms:
            groups = self.broker.groups
            await self._wait(
                time.monotonic() + wait_ms / 1000,
                lambda: groups.records_waiting(consumer.topic, consumer.group),
            )
            records = await self._read(consumer.poll, max_records, 0)
        return json_response(wire.Polled(records=[RecordOut.of(r) for r in records]))

    async def seek(self, request: Request, topic: str, group: str) -> Response:
        seek = decode_request(request.body, wire.SeekIn)
        consumer = self._consumer(request, topic, group)
        consumer.seek(seek.partition, seek.offset)
        return json_response(self._group_json(consumer))

    async def commit(self, request: Request, topic: str, group: str) -> Response:
        consumer = self._consumer(request, topic, group)
        offsets = decode_request(request.body, wire.CommitIn, empty_ok=True).offsets
        await self._blocking(consumer.commit, offsets)
        return json_response(self._group_json(consumer))

    async def get_group(self, request: Request, topic: str, group: str) -> Response:
        return json_response(self._group_json(self._consumer(request, topic, group)))

    @staticmethod
    def _group_json(consumer: Any) -> wire.GroupOut:
        return wire.GroupOut(
            topic=consumer.topic,
            group=consumer.group,
            positions=consumer.position(),
            committed=consumer.committed(),
            lag=consumer.lag(),
        )


HEALTH_ISOLATED_MAX = 100
"""/v1/health lists at most this many failing subjects (and counts them all)."""


def _failing(failure: Failure) -> wire.Failing:
    return wire.Failing(
        loop=failure.loop,
        task=failure.task,
        error=failure.error,
        since_ms=failure.since_ms,
        failures=failure.count,
        subject=failure.subject,
    )
