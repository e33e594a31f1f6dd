"""The HTTP routes of the event-type catalog (SPEC §11, docs/PROTOCOL.md).

Reading the catalog needs any valid key (it documents what producers send and
receivers get); changing it needs `admin`. Changes write a file, so they run on the
queue endpoints' pool of threads, never on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brook import wire
from brook.operations import OPERATIONS
from brook.server.http import Request, Response, json_response
from brook.wire import decode_request

if TYPE_CHECKING:
    from brook.server.api import Api


class EventTypeEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        for name, handler in (
            ("list_event_types", self.list),
            ("put_event_type", self.put),
            ("describe_event_type", self.get),
            ("delete_event_type", self.delete),
        ):
            api.router.serve(OPERATIONS[name], handler)

    async def list(self, request: Request) -> Response:
        return json_response(wire.EventTypes(event_types=self.api.broker.event_types()))

    async def put(self, request: Request, event_type: str) -> Response:
        asked = decode_request(request.body, wire.EventTypeIn, empty_ok=True)
        made = await self.api.queues.run(
            self.api.broker.put_event_type, event_type, asked.description, asked.schema
        )
        return json_response(made)

    async def get(self, request: Request, event_type: str) -> Response:
        return json_response(self.api.broker.event_type(event_type))

    async def delete(self, request: Request, event_type: str) -> Response:
        await self.api.queues.run(self.api.broker.delete_event_type, event_type)
        return json_response(wire.Deleted(deleted=event_type))
