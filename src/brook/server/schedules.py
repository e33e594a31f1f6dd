"""The schedule routes' rule for keys, and the one route with a handler of its own (the
others are the table's calls, served by server/adapter.py): a delete, whose call says
whether there was one.

A schedule fires into its topic, so a key limited to some topics reaches only the
schedules of its topics: it neither sees, changes nor makes one beyond them (403),
as for timers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brook import wire
from brook.errors import Forbidden, ScheduleNotFound
from brook.operations import OPERATIONS
from brook.server.auth import may_use
from brook.server.http import Request, Response, json_response

if TYPE_CHECKING:
    from brook.server.api import Api


class ScheduleEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        api.router.serve(OPERATIONS["delete_schedule"], self.delete)

    async def reached(self, request: Request, path: dict[str, str]) -> None:
        """Forbidden when the schedule the path names fires into a topic beyond the key
        (one not made yet is the put's to check, by its topic)."""
        key = request.key
        if key is None:
            return
        name = path["schedule"]
        try:  # (off the loop: the schedules' lock is held across a write to storage)
            info = await self.api.run("read", self.api.broker.get_schedule, name)
        except ScheduleNotFound:
            return
        if not may_use(key, info.topic):
            raise Forbidden(f"key {key.name!r} does not reach schedule {name!r}")

    async def delete(self, request: Request, schedule: str) -> Response:
        await self.reached(request, {"schedule": schedule})
        if not await self.api.run("blocking", self.api.broker.delete_schedule, schedule):
            raise ScheduleNotFound(f"no schedule named {schedule!r}")
        return json_response(wire.Deleted(deleted=schedule))
