"""The HTTP endpoints of timers (SPEC §4, docs/PROTOCOL.md).

Scheduling waits for the timer log to be durable, so it runs on the queue
endpoints' pool of threads, never on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from brook import wire
from brook.errors import Forbidden, TimerNotCancellable, TimerNotFound
from brook.models import TimerInfo, TimerSpec
from brook.operations import OPERATIONS
from brook.server import adapter
from brook.server.auth import may_use
from brook.server.http import Request, Response, json_response
from brook.wire import decode_request

if TYPE_CHECKING:
    from brook.server.api import Api


class _Many(msgspec.Struct):
    """Tells one timer from many before the body is decoded as either."""

    timers: msgspec.Raw = msgspec.Raw()


def timer_out(info: TimerInfo) -> wire.TimerOut:
    out = wire.TimerOut(
        timer_id=info.timer_id,
        state=info.state,  # type: ignore[arg-type]
        topic=info.topic,
        due_ms=info.due_ms,
    )
    if info.state == "fired":
        out.partition, out.offset, out.fired_at_ms = info.partition, info.offset, info.at_ms
    elif info.state == "cancelled":
        out.cancelled_at_ms = info.at_ms
    return out


def spec_of(timer: wire.TimerIn) -> TimerSpec:
    record = timer.record()
    return TimerSpec(
        timer.topic,
        record.value,
        timer.at,
        timer.delay_ms,
        record.key,
        record.headers,
        timer.timer_id,
    )


class TimerEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        api.router.serve(OPERATIONS["schedule"], self.schedule)
        api.router.serve(OPERATIONS["list_timers"], self.list_pending)
        api.router.serve(OPERATIONS["describe_timer"], self.get)
        api.router.serve(OPERATIONS["cancel_timer"], self.cancel)

    async def schedule(self, request: Request) -> Response:
        many = len(decode_request(request.body, _Many).timers) > 0
        if many:
            timers = decode_request(request.body, wire.TimersIn).timers
        else:
            timers = [decode_request(request.body, wire.TimerIn)]
        specs = [spec_of(timer) for timer in timers]
        if request.key is not None:
            for spec in specs:
                if not may_use(request.key, spec.topic):
                    raise Forbidden(f"this key may not use topic {spec.topic}")
        ids: list[str] = await self.api.run("blocking", self.api.broker.schedule_many, specs)
        return json_response(
            wire.ScheduledMany(timer_ids=ids) if many else wire.Scheduled(timer_id=ids[0])
        )

    async def list_pending(self, request: Request) -> Response:
        asked = adapter.arguments(OPERATIONS["list_timers"].query, request.query)
        topic, key = asked["topic"], request.key
        if key is not None and topic is not None and not may_use(key, topic):
            raise Forbidden(f"this key may not use topic {topic}")
        page = await self.api.run("blocking", self.api.broker.list_timers, **asked)
        # A key limited to some topics sees their timers only (a page may come out short).
        shown = [t for t in page.timers if key is None or may_use(key, t.topic)]
        return json_response(wire.TimersPage(timers=[timer_out(t) for t in shown], next=page.next))

    def _known(self, request: Request, timer: str) -> TimerInfo:
        info = self.api.broker.timer(timer)
        if info is None or (request.key is not None and not may_use(request.key, info.topic)):
            raise TimerNotFound(f"no timer {timer} is known")
        return info

    async def get(self, request: Request, timer: str) -> Response:
        return json_response(timer_out(self._known(request, timer)))

    async def cancel(self, request: Request, timer: str) -> Response:
        info = self._known(request, timer)
        # A pending timer may be firing right now: then it cannot be cancelled either.
        cancelled = info.state == "pending" and await self.api.run(
            "blocking", self.api.broker.cancel_timer, timer
        )
        if not cancelled:
            now = "being fired" if info.state == "pending" else info.state
            raise TimerNotCancellable(f"timer {timer} can no longer be cancelled: it is {now}")
        return json_response(wire.Cancelled(cancelled=timer))
