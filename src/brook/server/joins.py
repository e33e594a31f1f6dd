"""The HTTP endpoints of joins (docs/PROTOCOL.md, docs/CANVAS.md).

Making joins writes their files (durable), so it runs on the queue endpoints' pool
of threads; a long-poll on a join waits on the event loop, woken by commit rounds.
A key limited to some topics makes and reads only joins whose every topic (members,
continuation, on_error) it may use.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from brook import limits, names, wire
from brook.errors import BadRequest, Forbidden
from brook.operations import OPERATIONS
from brook.server import query
from brook.server.auth import may_use
from brook.server.http import Request, Response, json_response
from brook.wire import decode_request

if TYPE_CHECKING:
    from brook.server.api import Api


class JoinEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        api.router.serve(OPERATIONS["create_joins"], self.create)
        api.router.serve(OPERATIONS["describe_join"], self.describe)

    async def create(self, request: Request) -> Response:
        given = decode_request(request.body, wire.JoinsIn)
        specs = [join.spec() for join in given.joins]
        for spec in specs:
            topics = [m.topic for m in spec.members]
            topics += [c.topic for c in (spec.then, spec.on_error) if c is not None]
            for topic in topics:
                self._check_topic(request, topic)
        made = await self.api.run("blocking", self.api.broker.create_joins, specs)
        return json_response(wire.Joins(joins=[wire.JoinOut.of(info) for info in made]))

    async def describe(self, request: Request, join: str) -> Response:
        broker = self.api.broker
        if not names.ID.fullmatch(join):
            raise BadRequest(
                f"{join[:60]!r} is not a join id (1 to {limits.timer_id_chars_max} of "
                "A-Z a-z 0-9 . _ : -)"
            )
        wait_ms = min(query.number(request.query, "wait_ms", 0), limits.wait_ms_max)
        # A look takes the joins' lock, which their loop holds across a commit round:
        # off the event loop. The wait itself is the loop's (lock-free looks).
        info = await self.api.run("blocking", broker.join, join)  # (JoinNotFound before a wait)
        self._check_topic(request, info.topic)
        if wait_ms and not broker.join_settled(join):
            deadline = time.monotonic() + wait_ms / 1000
            await self.api.bridge.wait_until(functools.partial(broker.join_settled, join), deadline)
            info = await self.api.run("blocking", broker.join, join)
        return json_response(wire.JoinOut.of(info))

    @staticmethod
    def _check_topic(request: Request, topic: str) -> None:
        key = request.key
        if key is not None and not may_use(key, topic):
            raise Forbidden(f"key {key.name!r} may not use topic {topic!r}")
