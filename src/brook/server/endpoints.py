"""The HTTP endpoints of delivery endpoints (SPEC §4 and §7, docs/PROTOCOL.md).

Endpoints can send any topic's records anywhere, so every route needs the
`admin` scope. Changes wait for storage (a file, queue groups), so they run on
the queue endpoints' pool of threads, never on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from brook import validate, wire
from brook.errors import BadRequest, Forbidden
from brook.models import Attempt, Endpoint, TestResult
from brook.operations import OPERATIONS
from brook.server import query
from brook.server.auth import may_use
from brook.server.http import Request, Response, json_response
from brook.wire import decode_request, text_of

if TYPE_CHECKING:
    from brook.server.api import Api


def attempt_out(attempt: Attempt) -> wire.AttemptOut:
    fields = msgspec.structs.asdict(attempt)
    excerpt = fields.pop("excerpt")
    return wire.AttemptOut(**fields, excerpt_b64=excerpt, excerpt=text_of(excerpt))


def test_out(result: TestResult) -> wire.TestOut:
    return wire.TestOut(
        status=result.status,
        latency_ms=result.latency_ms,
        error=result.error,
        excerpt_b64=result.excerpt,
        excerpt=text_of(result.excerpt),
    )


class EndpointEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        for name, handler in (
            ("list_endpoints", self.list),
            ("put_endpoint", self.put),
            ("describe_endpoint", self.get),
            ("delete_endpoint", self.delete),
            ("endpoint_stats", self.stats),
            ("endpoint_attempts", self.attempts),
            ("message_attempts", self.message_attempts),
            ("redrive_endpoint", self.redrive),
            ("replay_endpoint", self.replay),
            ("enable_endpoint", self.enable),
            ("disable_endpoint", self.disable),
            ("test_endpoint", self.test),
            ("rotate_secret", self.rotate_secret),
        ):
            api.router.serve(OPERATIONS[name], handler)

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await self.api.queues.run(fn, *args, **kwargs)

    def _handle(self, name: str) -> Endpoint:
        handle: Endpoint = self.api.broker.endpoint(name)
        return handle

    async def list(self, request: Request) -> Response:
        infos = self.api.broker.endpoints()
        return json_response(wire.Endpoints(endpoints=infos))

    async def put(self, request: Request, endpoint: str) -> Response:
        given = decode_request(request.body, wire.EndpointIn).given()
        info = await self._run(self.api.broker.create_endpoint, endpoint, **given)
        return json_response(info)

    async def get(self, request: Request, endpoint: str) -> Response:
        return json_response(self._handle(endpoint).info())

    async def delete(self, request: Request, endpoint: str) -> Response:
        await self._run(self.api.broker.delete_endpoint, endpoint)
        return json_response(wire.Deleted(deleted=endpoint))

    async def stats(self, request: Request, endpoint: str) -> Response:
        handle = self._handle(endpoint)
        return json_response(await self._run(handle.stats))

    async def attempts(self, request: Request, endpoint: str) -> Response:
        topic = request.query.get("topic")
        if topic is None:
            raise BadRequest("the query parameter topic is required")
        partition = query.number(request.query, "partition")
        offset = query.number(request.query, "offset")
        handle = self._handle(endpoint)
        found = await self._run(handle.attempts, topic, partition, offset)
        return json_response(wire.Attempts(attempts=[attempt_out(a) for a in found]))

    async def message_attempts(self, request: Request, message: str) -> Response:
        topic, _, _ = validate.webhook_id(message)
        if request.key is not None and not may_use(request.key, topic):
            raise Forbidden(f"this key may not use topic {topic}")
        found = await self._run(self.api.broker.message_attempts, message)
        return json_response(
            wire.MessageAttemptsOut(
                endpoints=[
                    wire.EndpointAttemptsOut(
                        endpoint=m.endpoint, attempts=[attempt_out(a) for a in m.attempts]
                    )
                    for m in found
                ]
            )
        )

    async def redrive(self, request: Request, endpoint: str) -> Response:
        asked = decode_request(request.body, wire.EndpointRedriveIn, empty_ok=True)
        handle = self._handle(endpoint)
        count = await self._run(handle.redrive, asked.topic, asked.limit, asked.positions())
        return json_response(wire.Redriven(redriven=count))

    async def replay(self, request: Request, endpoint: str) -> Response:
        asked = decode_request(request.body, wire.EndpointReplayIn)
        handle = self._handle(endpoint)
        count = await self._run(
            handle.replay, asked.topic, asked.since_ms, asked.partition, asked.offset
        )
        return json_response(wire.Replayed(replayed=count))

    async def enable(self, request: Request, endpoint: str) -> Response:
        return json_response(await self._run(self._handle(endpoint).enable))

    async def disable(self, request: Request, endpoint: str) -> Response:
        return json_response(await self._run(self._handle(endpoint).disable))

    async def test(self, request: Request, endpoint: str) -> Response:
        return json_response(test_out(await self._run(self._handle(endpoint).test)))

    async def rotate_secret(self, request: Request, endpoint: str) -> Response:
        asked = decode_request(request.body, wire.RotateIn, empty_ok=True)
        secret = await self._run(self._handle(endpoint).rotate_secret, asked.secret)
        return json_response(wire.Rotated(secret=secret))
