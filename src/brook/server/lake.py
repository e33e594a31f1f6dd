"""The HTTP endpoints of the lake (docs/PROTOCOL.md): where it stands, and a sync.

A sync writes Parquet for seconds at a time: it runs off the event loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from brook import wire
from brook.errors import Forbidden
from brook.models import LakeStatus
from brook.operations import OPERATIONS
from brook.server.auth import may_use
from brook.server.http import Request, Response, json_response
from brook.wire import decode_request

if TYPE_CHECKING:
    from brook.server.api import Api


def lake_out(statuses: list[LakeStatus]) -> wire.Lake:
    return msgspec.convert({"topics": statuses}, wire.Lake, from_attributes=True)


class LakeEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        api.router.serve(OPERATIONS["lake_status"], self.status)
        api.router.serve(OPERATIONS["lake_sync"], self.sync)

    async def status(self, request: Request) -> Response:
        topic = request.query.get("topic")
        self._check(request, topic)
        statuses = await self.api.run("read", self.api.broker.lake_status, topic)
        return json_response(lake_out(self._visible(request, statuses)))

    async def sync(self, request: Request) -> Response:
        topic = decode_request(request.body, wire.LakeSyncIn, empty_ok=True).topic
        self._check(request, topic)
        statuses = await self.api.run("long", self.api.broker.lake_sync, topic)
        return json_response(lake_out(self._visible(request, statuses)))

    def _check(self, request: Request, topic: str | None) -> None:
        if request.key is not None and topic is not None and not may_use(request.key, topic):
            raise Forbidden(f"this key may not use topic {topic}")

    def _visible(self, request: Request, statuses: list[LakeStatus]) -> list[LakeStatus]:
        """A key limited to some topics sees theirs only."""
        key = request.key
        return [s for s in statuses if key is None or may_use(key, s.topic)]
