"""The HTTP API v1 (SPEC §4, docs/PROTOCOL.md): requests in, broker calls, responses out."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from brook import limits, validate, wire
from brook.broker import Broker
from brook.errors import (
    BadRequest,
    BrookError,
    PartitionNotFound,
    UnsupportedMediaType,
)
from brook.models import Failure
from brook.operations import OPERATIONS, TABLE
from brook.server import adapter, openapi, pipeline
from brook.server.adapter import Executors
from brook.server.auth import Authenticator, whole_broker
from brook.server.endpoints import EndpointEndpoints
from brook.server.http import Request, Response, error_response, json_response, media_type
from brook.server.joins import JoinEndpoints
from brook.server.metrics import RequestCounts, registry_for, render
from brook.server.queues import QueueEndpoints
from brook.server.router import Route, Router
from brook.server.schedules import ScheduleEndpoints
from brook.server.staging import StagingEndpoints
from brook.server.timers import TimerEndpoints
from brook.server.ui.dashboard import PREFIX as UI_PREFIX
from brook.server.ui.dashboard import Dashboard
from brook.wire import BATCH_TYPE, JSON_TYPE, RAW_TYPE, RecordOut, decode_request

log = logging.getLogger("brook.server")
_UI_FOLDER = UI_PREFIX + "/"


class Api:
    def __init__(
        self,
        broker: Broker,
        loop: asyncio.AbstractEventLoop,
        auth: Authenticator,
        where: str = "",
    ) -> None:
        self.broker = broker
        self.loop = loop
        self.auth = auth
        self.bridge = broker.bridge(loop)
        self.record_bytes_max = broker.record_bytes_max
        self.executors = Executors(loop)
        self.run = self.executors.run
        self.router = Router()
        for name, handler in (
            ("health", self.health),
            ("describe_topic", self.get_topic),
            ("append", self.post_records),
            ("read", self.get_records),
            ("poll", self.poll),
            ("commit", self.commit),
            ("seek", self.seek),
            ("describe_group", self.get_group),
            ("metrics", self.metrics),
            ("openapi", self.openapi),
        ):
            self.router.serve(OPERATIONS[name], handler)
        self.queues = QueueEndpoints(self)
        self.timers = TimerEndpoints(self)
        self.schedules = ScheduleEndpoints(self)
        self.joins = JoinEndpoints(self)
        self.staging = StagingEndpoints(self)
        self.endpoints = EndpointEndpoints(self)
        self.handles: dict[str, adapter.Handle] = {
            "queue": self.queues.existing,
            "endpoint": self.endpoints.reached,
            "schedule": self.schedules.reached,
            "whole_broker": _whole_broker,
        }
        for operation in TABLE:  # every operation whose row names its facade call
            if operation.call is not None:
                self.router.serve(operation, adapter.handler(self, operation))
        self.ui = Dashboard(broker, auth, self._read, where or "its storage", self.router)
        self.requests = RequestCounts()
        self.registry = registry_for(broker, self.requests)
        self._query_names = {
            (operation.method, operation.path): tuple(param.name for param in operation.query)
            for operation in OPERATIONS.values()
        }

    async def __call__(self, request: Request) -> Response:
        if request.path == UI_PREFIX or request.path.startswith(_UI_FOLDER):
            page = await self.ui(request)  # its own login, errors and pages
            self.requests.add(UI_PREFIX, request.method, page.status)
            return page
        template = "unmatched"
        try:
            route, params, request.key = pipeline.route(self.router, request, request.path, self)
            template = route.template
            response: Response = await route.handler(request, **params)
        except BrookError as exc:
            response = error_response(exc)
        except Exception:
            # A bug, not bad input and not storage: 500, which clients do not retry blindly.
            log.exception("unexpected error answering %s %s", request.method, request.path)
            response = error_response(BrookError("internal error; see the server log"))
        self.requests.add(template, request.method, response.status)
        return response

    # ------------------------------------------------------------ the caller (pipeline.py)

    @property
    def keys(self) -> bool:
        return self.auth.enabled

    def identify(self, request: Request) -> Any:
        return self.auth.identify(request.headers.get("authorization"))

    def admit(self, request: Request, scope: str, topic: str | None) -> Any:
        if not self.auth.enabled:
            return None
        return self.auth.check(request.headers.get("authorization"), scope, topic)

    def prepare(self, request: Request, route: Route) -> None:
        """Refuse query parameters the route does not take: a misspelt `?ofset=5` would
        otherwise be ignored and the default used."""
        if not request.query:
            return
        template = route.template
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
        return await self.run("read", fn, *args)

    def close(self) -> None:
        """Let the calls in flight finish (the server has stopped taking requests)."""
        self.ui.close()  # its ticker first: it reads through the pool
        self.executors.close()
        self.bridge.close()

    def stop(self) -> None:
        """The server stops: answer every long poll now."""
        self.bridge.stop()

    # ------------------------------------------------------------ endpoints

    async def health(self, request: Request) -> Response:
        """200 while the broker serves; 503 naming every background loop (or task)
        that is failing now, until it works again. Failures of single endpoints or
        queue groups are detail (`isolated`): they do not stop the others."""
        failing = self.broker.failing()
        isolated = self.broker.isolated()
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
        whole_broker(request.key)  # every tenant's topics and endpoints are in it
        body = await self._read(render, self.registry)  # walks every topic and group
        return Response(200, body, "text/plain; version=0.0.4; charset=utf-8")

    async def get_topic(self, request: Request, topic: str) -> Response:
        def described() -> wire.TopicDetail:
            info = self.broker.topic_info(topic)
            starts = {p.partition: p.start_offset for p in self.broker.partitions(topic)}
            return wire.TopicDetail.detail(info, starts)

        return json_response(await self._read(described))  # may open the topic's logs

    async def post_records(self, request: Request, topic: str) -> Response:
        known = self.bridge.known(topic)  # a reserved or malformed name: before the body
        content_type = media_type(request)
        partition = adapter.arguments(_APPEND.query, request.query)["partition"]
        columns: wire.Columns | wire.ClientBatches
        if content_type == JSON_TYPE:
            columns = decode_request(request.body, wire.RecordsIn).columns(self.record_bytes_max)
            if not len(columns):
                return json_response({"acks": []})
        elif content_type == BATCH_TYPE:
            columns = validate.batch_body(request.body, record_bytes_max=self.record_bytes_max)
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
                record_bytes_max=self.record_bytes_max,
            )
        pending = self.bridge.submit(topic, columns, partition) if known else None
        if pending is not None:  # the common case, one coroutine less on every resumption
            acks = (await pending).result()
        else:
            acks = await self.bridge.append(topic, columns, partition)
        return json_response(wire.Acks(acks=acks))

    async def get_records(self, request: Request, topic: str) -> Response:
        partitions = self.bridge.partitions(topic)  # TopicNotFound before the query's errors
        asked = adapter.arguments(_READ.query, request.query)
        partition, offset, limit = asked["partition"], asked["offset"], asked["limit"]
        if partition >= partitions:
            raise PartitionNotFound(f"topic {topic} has no partition {partition}")
        wait_ms = asked["wait_ms"]
        if wait_ms:
            deadline = time.monotonic() + wait_ms / 1000
            await self.bridge.wait_for_records(topic, partition, offset, deadline)
        handle = self.broker.topic(topic)
        if BATCH_TYPE in request.headers.get("accept", ""):
            # Stored batches as they are: no decoding on the server (docs/PROTOCOL.md).
            body, next_offset = await self._read(handle.read_batches, partition, offset, limit)
            return Response(200, body, BATCH_TYPE, [("brook-next-offset", str(next_offset))])
        records, next_offset = await self._read(handle.read_page, partition, offset, limit)
        return json_response(
            wire.RecordPage(records=[RecordOut.of(r) for r in records], next_offset=next_offset)
        )

    def _consumer(self, request: Request, topic: str, group: str) -> Any:
        """The group's consumer; `?start=latest` places a group new to the broker at the end."""
        start = request.query.get("start", "earliest")
        return self.broker.consumer(topic, group, start)

    async def poll(self, request: Request, topic: str, group: str) -> Response:
        consumer = self._consumer(request, topic, group)
        asked = adapter.arguments(_POLL.query, request.query)
        max_records, wait_ms = asked["max_records"], asked["wait_ms"]
        records = await self._read(consumer.poll, max_records, 0)
        if not records and wait_ms:
            deadline = time.monotonic() + wait_ms / 1000
            await self.bridge.wait_for_group(consumer.topic, consumer.group, deadline)
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
        await self.run("blocking", consumer.commit, offsets)
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


HEALTH_ISOLATED_MAX = limits.health_isolated_max
_APPEND, _READ, _POLL = OPERATIONS["append"], OPERATIONS["read"], OPERATIONS["poll"]


async def _whole_broker(request: Request, path: dict[str, str]) -> None:
    """The guard of the rows changing what every tenant shares (auth.whole_broker)."""
    whole_broker(request.key)


def _failing(failure: Failure) -> wire.Failing:
    return wire.Failing(
        loop=failure.loop,
        task=failure.task,
        error=failure.error,
        since_ms=failure.since_ms,
        failures=failure.count,
        subject=failure.subject,
    )
