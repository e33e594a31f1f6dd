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
from brook.errors import EndpointNotFound, Forbidden
from brook.models import EndpointInfo
from brook.names import MESSAGE_ID_PATTERN
from brook.operations import OPERATIONS
from brook.server.auth import endpoint_beyond, endpoint_unreached, may_use
from brook.server.http import Request, Response, json_response
from brook.wire import decode_request

if TYPE_CHECKING:
    from brook.server.api import Api


class EndpointEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        for name, handler in (
            ("list_endpoints", self.list),
            ("put_endpoint", self.put),
            ("message_attempts", self.message_attempts),
            ("portal_link", self.portal_link),
        ):
            api.router.serve(OPERATIONS[name], handler)

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await self.api.run("blocking", fn, *args, **kwargs)

    async def reached(self, request: Request, path: dict[str, str]) -> Endpoint:
        """The endpoint the path names, if the key reaches it (the table's `endpoint.`
        calls, and its broker calls guarded by "endpoint")."""
        return self._handle(request, path["endpoint"])

    def _handle(self, request: Request, name: str) -> Endpoint:
        """The endpoint, if the request's key reaches it (else Forbidden)."""
        handle: Endpoint = self.api.broker.endpoint(name)
        if request.key is not None:
            info = handle.info()
            why = endpoint_unreached(request.key, name, info.topics, info.tenant)
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
                        endpoint=m.endpoint, attempts=[wire.AttemptOut.of(a) for a in m.attempts]
                    )
                    for m in found
                ]
            )
        )

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
