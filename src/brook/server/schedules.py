"""The one schedule route with a handler of its own (the others are the table's calls,
served by server/adapter.py): a delete, whose call says whether there was one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from brook import wire
from brook.errors import ScheduleNotFound
from brook.operations import OPERATIONS
from brook.server.http import Request, Response, json_response

if TYPE_CHECKING:
    from brook.server.api import Api


class ScheduleEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        api.router.serve(OPERATIONS["delete_schedule"], self.delete)

    async def delete(self, request: Request, schedule: str) -> Response:
        if not await self.api.run("blocking", self.api.broker.delete_schedule, schedule):
            raise ScheduleNotFound(f"no schedule named {schedule!r}")
        return json_response(wire.Deleted(deleted=schedule))
