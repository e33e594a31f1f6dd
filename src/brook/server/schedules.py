"""The HTTP endpoints of periodic schedules (docs/PROTOCOL.md).

Changing a schedule writes its file and arms a timer (both durable), so it runs
on the queue endpoints' pool of threads, never on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brook import wire
from brook.errors import ScheduleNotFound
from brook.operations import OPERATIONS
from brook.server.http import Request, Response, json_response
from brook.wire import decode_request

if TYPE_CHECKING:
    from brook.server.api import Api


class ScheduleEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        serve = api.router.serve
        serve(OPERATIONS["list_schedules"], self.list)
        serve(OPERATIONS["put_schedule"], self.put)
        serve(OPERATIONS["describe_schedule"], self.get)
        serve(OPERATIONS["delete_schedule"], self.delete)
        serve(OPERATIONS["pause_schedule"], self.pause)
        serve(OPERATIONS["resume_schedule"], self.resume)

    async def list(self, request: Request) -> Response:
        found = self.api.broker.list_schedules()
        return json_response(wire.Schedules(schedules=[wire.ScheduleOut.of(i) for i in found]))

    async def put(self, request: Request, schedule: str) -> Response:
        given = decode_request(request.body, wire.ScheduleIn)
        record = given.record()
        info = await self.api.queues.run(
            self.api.broker.put_schedule,
            schedule,
            given.topic,
            record.value,
            given.cron,
            given.every_ms,
            given.tz,
            given.missed,
            record.key,
            record.headers,
        )
        return json_response(wire.ScheduleOut.of(info))

    async def get(self, request: Request, schedule: str) -> Response:
        return json_response(wire.ScheduleOut.of(self.api.broker.get_schedule(schedule)))

    async def delete(self, request: Request, schedule: str) -> Response:
        if not await self.api.queues.run(self.api.broker.delete_schedule, schedule):
            raise ScheduleNotFound(f"no schedule named {schedule!r}")
        return json_response(wire.Deleted(deleted=schedule))

    async def pause(self, request: Request, schedule: str) -> Response:
        info = await self.api.queues.run(self.api.broker.pause_schedule, schedule)
        return json_response(wire.ScheduleOut.of(info))

    async def resume(self, request: Request, schedule: str) -> Response:
        info = await self.api.queues.run(self.api.broker.resume_schedule, schedule)
        return json_response(wire.ScheduleOut.of(info))
