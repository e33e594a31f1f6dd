"""The HTTP endpoints of timers (SPEC §4, docs/PROTOCOL.md).

Scheduling waits for the timer log to be durable, so it runs on the queue
endpoints' pool of threads, never on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from brook import limits
from brook.errors import BadRequest, Forbidden, TimerNotFound
from brook.server.auth import may_use
from brook.server.http import Request, Response, json_response
from brook.server.wire import RECORD_BODY_FIELDS, one_record_from_json, parse_json
from brook.timers.checks import TimerSpec
from brook.timers.model import TimerInfo

if TYPE_CHECKING:
    from brook.server.api import Api

TIMER_FIELDS = RECORD_BODY_FIELDS | {"topic", "at", "delay_ms", "timer_id"}


def timer_to_json(info: TimerInfo) -> dict[str, Any]:
    out: dict[str, Any] = {
        "timer_id": info.timer_id,
        "state": info.state,
        "topic": info.topic,
        "due_ms": info.due_ms,
    }
    if info.state == "fired":
        out.update(partition=info.partition, offset=info.offset, fired_at_ms=info.at_ms)
    elif info.state == "cancelled":
        out["cancelled_at_ms"] = info.at_ms
    return out


def spec_from_json(item: Any, index: int) -> TimerSpec:
    if not isinstance(item, dict):
        raise BadRequest(f"timer {index}: must be a JSON object")
    unknown = set(item) - TIMER_FIELDS
    if unknown:
        raise BadRequest(f"timer {index}: unknown fields: {', '.join(sorted(unknown))}")
    topic = item.get("topic")
    if not isinstance(topic, str):
        raise BadRequest(f"timer {index}: topic (a string) is required")
    record = one_record_from_json(item, index)
    return TimerSpec(
        topic,
        record.value,
        item.get("at"),
        item.get("delay_ms"),
        record.key,
        record.headers,
        item.get("timer_id"),
    )


class TimerEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        r = api.router
        r.add("POST", "/v1/timers", self.schedule, "produce")
        r.add("GET", "/v1/timers/{timer}", self.get, "produce")
        r.add("DELETE", "/v1/timers/{timer}", self.cancel, "produce")

    async def schedule(self, request: Request) -> Response:
        document = parse_json(request.body)
        if not isinstance(document, dict):
            raise BadRequest('the body must be a timer, or {"timers": [...]}')
        many = "timers" in document
        if many:
            if set(document) != {"timers"} or not isinstance(document["timers"], list):
                raise BadRequest('the body must be {"timers": [timer, ...]}')
            items = document["timers"]
            if len(items) > limits.schedule_timers_max:
                raise BadRequest(f"at most {limits.schedule_timers_max} timers per request")
        else:
            items = [document]
        specs = [spec_from_json(item, i) for i, item in enumerate(items)]
        if request.key is not None:
            for spec in specs:
                if not may_use(request.key, spec.topic):
                    raise Forbidden(f"this key may not use topic {spec.topic}")
        ids: list[str] = await self.api.queues._run(self.api.broker.schedule_many, specs)
        return json_response({"timer_ids": ids} if many else {"timer_id": ids[0]})

    def _known(self, request: Request, timer: str) -> TimerInfo:
        info = self.api.broker.timer(timer)
        if info is None or (request.key is not None and not may_use(request.key, info.topic)):
            raise TimerNotFound(f"no timer {timer} is known")
        return info

    async def get(self, request: Request, timer: str) -> Response:
        return json_response(timer_to_json(self._known(request, timer)))

    async def cancel(self, request: Request, timer: str) -> Response:
        info = self._known(request, timer)
        # A pending timer may be firing right now: then it cannot be cancelled either.
        cancelled = info.state == "pending" and await self.api.queues._run(
            self.api.broker.cancel_timer, timer
        )
        if not cancelled:
            raise TimerNotFound(f"timer {timer} can no longer be cancelled: it is {info.state}")
        return json_response({"cancelled": timer})
