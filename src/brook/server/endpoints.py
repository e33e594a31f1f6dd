"""The HTTP endpoints of delivery endpoints (SPEC §4, §7 and §11, docs/PROTOCOL.md).

Endpoints can send any topic's records anywhere, so every route needs the
`admin` scope, and a key reaches only the endpoints whose topic patterns lie within
its own (and, for a key naming a tenant, that tenant's): it neither sees nor changes
another, nor subscribes one beyond its patterns (auth.endpoint_beyond, 403). Changes
wait for storage (a file, queue groups), so they run on the queue endpoints' pool of
threads, never on the event loop.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import msgspec

from brook import limits, wire
from brook.api import EndpointApi as Endpoint
from brook.errors import BadRequest, EndpointNotFound, Forbidden
from brook.models import Attempt, EndpointInfo, TestResult
from brook.names import MESSAGE_ID_PATTERN
from brook.operations import OPERATIONS
from brook.server import query
from brook.server.auth import endpoint_beyond, may_use
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
            ("resend_message", self.resend),
            ("enable_endpoint", self.enable),
            ("disable_endpoint", self.disable),
            ("test_endpoint", self.test),
            ("rotate_secret", self.rotate_secret),
            ("portal_link", self.portal_link),
        ):
            api.router.serve(OPERATIONS[name], handler)

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await self.api.queues.run(fn, *args, **kwargs)

    def _handle(self, request: Request, name: str) -> Endpoint:
        """The endpoint, if the request's key reaches it (else Forbidden)."""
        handle: Endpoint = self.api.broker.endpoint(name)
        if request.key is not None:
            info = handle.info()
            why = endpoint_beyond(request.key, info.topics, info.tenant)
            if why is not None:
                raise Forbidden(why)
        return handle

    def _reaches(self, request: Request, info: EndpointInfo) -> bool:
        key = request.key
        return key is None or endpoint_beyond(key, info.topics, info.tenant) is None

    async def list(self, request: Request) -> Response:
        infos = [i for i in self.api.broker.endpoints() if self._reaches(request, i)]
        return json_response(wire.Endpoints(endpoints=infos))

    async def put(self, request: Request, endpoint: str) -> Response:
        stored: EndpointInfo | None = None
        if request.key is not None:  # an endpoint beyond the key: refused before the body
            try:
                stored = self._handle(request, endpoint).info()
            except EndpointNotFound:
                stored = None
        given = decode_request(request.body, wire.EndpointIn).given()
        if request.key is not None:
            given = self._within_key(request, stored, given)
        info = await self._run(self.api.broker.create_endpoint, endpoint, **given)
        return json_response(info)

    def _within_key(
        self, request: Request, stored: EndpointInfo | None, given: dict[str, Any]
    ) -> dict[str, Any]:
        """The settings a key may give the endpoint it reaches (`stored`, or a new one):
        patterns within its own, its own tenant (set for it when it names one). Forbidden."""
        key = request.key
        assert key is not None
        if key.tenant is not None:
            if given.get("tenant", key.tenant) != key.tenant:
                raise Forbidden(
                    f"key {key.name!r} reaches only the endpoints of tenant {key.tenant!r}"
                )
            given = {**given, "tenant": key.tenant}
        topics = given.get("topics") or (stored.topics if stored is not None else [])
        why = endpoint_beyond(key, list(topics), given.get("tenant", key.tenant))
        if why is not None:
            raise Forbidden(why)
        return given

    async def get(self, request: Request, endpoint: str) -> Response:
        return json_response(self._handle(request, endpoint).info())

    async def delete(self, request: Request, endpoint: str) -> Response:
        self._handle(request, endpoint)
        await self._run(self.api.broker.delete_endpoint, endpoint)
        return json_response(wire.Deleted(deleted=endpoint))

    async def stats(self, request: Request, endpoint: str) -> Response:
        handle = self._handle(request, endpoint)
        return json_response(await self._run(handle.stats))

    async def attempts(self, request: Request, endpoint: str) -> Response:
        handle = self._handle(request, endpoint)
        topic = request.query.get("topic")
        if topic is None:
            raise BadRequest("the query parameter topic is required")
        partition = query.number(request.query, "partition")
        offset = query.number(request.query, "offset")
        found = await self._run(handle.attempts, topic, partition, offset)
        return json_response(wire.Attempts(attempts=[attempt_out(a) for a in found]))

    async def message_attempts(self, request: Request, message: str) -> Response:
        if re.fullmatch(MESSAGE_ID_PATTERN, message):  # Brook's own id names its topic
            topic = message.rsplit(":", 2)[0]
            if request.key is not None and not may_use(request.key, topic):
                raise Forbidden(f"this key may not use topic {topic}")
        found = await self._run(self.api.broker.message_attempts, message)
        if request.key is not None:
            reached = {i.name for i in self.api.broker.endpoints() if self._reaches(request, i)}
            found = [m for m in found if m.endpoint in reached]
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
        handle = self._handle(request, endpoint)
        asked = decode_request(request.body, wire.EndpointRedriveIn, empty_ok=True)
        count = await self._run(handle.redrive, asked.topic, asked.limit, asked.positions())
        return json_response(wire.Redriven(redriven=count))

    async def replay(self, request: Request, endpoint: str) -> Response:
        handle = self._handle(request, endpoint)
        asked = decode_request(request.body, wire.EndpointReplayIn)
        count = await self._run(
            handle.replay, asked.topic, asked.since_ms, asked.partition, asked.offset
        )
        return json_response(wire.Replayed(replayed=count))

    async def portal_link(self, request: Request) -> Response:
        asked = decode_request(request.body, wire.PortalIn)
        key = request.key
        # A key reaching only some endpoints cannot open every endpoint of a tenant:
        # only a key for every topic, or the tenant's own key, makes its link.
        if key is not None and (
            key.tenant != asked.tenant if key.tenant is not None else key.topics != ["*"]
        ):
            raise Forbidden(
                f"key {key.name!r} may not make a portal link for tenant {asked.tenant!r}"
            )
        ttl_s = asked.ttl_s if asked.ttl_s is not None else limits.portal_ttl_s_default
        made = await self._run(self.api.broker.portal_link, asked.tenant, ttl_s)
        host = request.headers.get("host")
        if host:
            scheme = "https" if request.headers.get("x-forwarded-proto") == "https" else "http"
            made = msgspec.structs.replace(made, url=f"{scheme}://{host}{made.path}")
        return json_response(made)

    async def resend(self, request: Request, endpoint: str) -> Response:
        handle = self._handle(request, endpoint)
        asked = decode_request(request.body, wire.ResendIn)
        return json_response(await self._run(handle.resend, asked.webhook_id))

    async def enable(self, request: Request, endpoint: str) -> Response:
        return json_response(await self._run(self._handle(request, endpoint).enable))

    async def disable(self, request: Request, endpoint: str) -> Response:
        return json_response(await self._run(self._handle(request, endpoint).disable))

    async def test(self, request: Request, endpoint: str) -> Response:
        return json_response(test_out(await self._run(self._handle(request, endpoint).test)))

    async def rotate_secret(self, request: Request, endpoint: str) -> Response:
        handle = self._handle(request, endpoint)
        asked = decode_request(request.body, wire.RotateIn, empty_ok=True)
        secret = await self._run(handle.rotate_secret, asked.secret)
        return json_response(wire.Rotated(secret=secret))
