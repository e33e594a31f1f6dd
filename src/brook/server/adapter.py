"""The one generic handler: every operation the table gives a facade call is served by
it, so adding one is a row of brook/operations.py and a method of the facade.

For a request it reads the query's parameters as the row declares them (types,
defaults, caps, 400s), decodes the body as the row's body type, finds the broker or
the handle the path names (a handle the key must reach), runs the call on the row's
executor, and answers `answer.of(result)`; a BrookError the call raises becomes its
status and code in server/api.py, as for every handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from brook import limits, wire
from brook.errors import BadRequest, Forbidden
from brook.operations import Operation, Param
from brook.server import query
from brook.server.auth import may_use
from brook.server.http import Request, Response, json_response

if TYPE_CHECKING:
    import asyncio

    from brook.server.api import Api

Handle = Callable[[Request, dict[str, str]], Awaitable[Any]]
"""Finds the handle a path names (a queue group, an endpoint), checking the key reaches it."""


class Executors:
    """Where calls run, by the kind the table declares (Operation.executor): on the
    event loop, or on one of three pools of threads, each bounded (limits.py)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pools = {
            "read": ThreadPoolExecutor(limits.read_threads, thread_name_prefix="brook-read"),
            "blocking": ThreadPoolExecutor(
                limits.blocking_call_threads, thread_name_prefix="brook-call"
            ),
            "long": ThreadPoolExecutor(limits.long_call_threads, thread_name_prefix="brook-long"),
        }

    async def run(self, kind: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)` where `kind` runs: at once on the loop, or on its pool."""
        if kind == "loop":
            return fn(*args, **kwargs)
        pool = self.pools[kind]
        return await self.loop.run_in_executor(pool, lambda: fn(*args, **kwargs))

    def close(self) -> None:
        """Let the calls in flight finish (the server has stopped taking requests)."""
        for pool in self.pools.values():
            pool.shutdown(wait=True)


def arguments(params: tuple[Param, ...], given: dict[str, str]) -> dict[str, Any]:
    """The query's parameters as the call's keyword arguments, each read as declared
    (absent: its default, None when it has none). BadRequest names a bad one."""
    found: dict[str, Any] = {}
    for param in params:
        text = given.get(param.name)
        if text is None:
            if param.required:
                raise BadRequest(f"the query parameter {param.name} is required")
            found[param.name] = param.default
        elif param.kind == "whole":
            value = query.whole(text, param.name, param.low)
            if param.high is not None and value > param.high:
                raise BadRequest(f"{param.name} must be at most {param.high}, not {value}")
            found[param.name] = value if param.cap is None else min(value, param.cap)
        elif param.kind == "flag":
            found[param.name] = query.flag(given, param.name, bool(param.default))
        elif param.kind == "position":
            found[param.name] = position(text, param.name)
        elif param.kind == "choice" and text not in param.choices:
            raise BadRequest(
                f"{param.name} must be one of {', '.join(param.choices)}, not {text!r}"
            )
        else:
            found[param.name] = text
    return found


def position(text: str, name: str) -> tuple[int, int]:
    """`partition:offset` as a pair; BadRequest when it is not one."""
    partition, colon, offset = text.partition(":")
    if not colon:
        raise BadRequest(f"{name} must be partition:offset, not {text[:40]!r}")
    return query.whole(partition, f"{name}'s partition"), query.whole(offset, f"{name}'s offset")


def handler(api: Api, operation: Operation) -> Callable[..., Awaitable[Response]]:
    """The handler of `operation`, whose row names its facade call."""
    assert operation.call is not None, operation.name
    owner, _, method = operation.call.rpartition(".")
    reach = owner or operation.guard
    run, find = api.executors.run, (api.handles[reach] if reach else None)
    body, visible = operation.body, operation.visible

    async def handle(request: Request, **path: str) -> Response:
        target: Any = api.broker
        positional: list[str] = list(path.values())
        if find is not None:  # first: what the key may not reach is a 403 whatever it asks
            handle = await find(request, path)
            if owner:
                target, positional = handle, []
        args = arguments(operation.query, request.query)
        if body is not None:
            given = wire.decode_request(request.body, body, empty_ok=not operation.body_required)
            args.update(given.arguments())
        key = request.key
        if visible is not None and key is not None:
            topic = args.get("topic")
            if topic is not None and not may_use(key, topic):
                raise Forbidden(f"key {key.name!r} may not use topic {topic!r}")
        result = await run(operation.executor, getattr(target, method), *positional, **args)
        if visible is not None and key is not None and isinstance(result, list):
            result = [item for item in result if may_use(key, getattr(item, visible))]
        return json_response(answer(operation, result, path))

    return handle


def answer(operation: Operation, result: Any, path: dict[str, str]) -> Any:
    """The answer's body: `answer.of(result)` for the API's own shapes; a DELETE's names
    what its path named; the public types (EndpointInfo, ...) are answers as they are."""
    shape = operation.answer
    if shape is wire.Deleted:
        return wire.Deleted(deleted=list(path.values())[-1])
    if shape is not None and issubclass(shape, wire.Out):
        return shape.of(result)
    return result
