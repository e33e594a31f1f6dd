"""The HTTP API v1 as one table: every operation's name, method, path, API-key scope,
retry-safety, query parameters, request and answer shapes, and the rules between
fields that a schema cannot state.

The server's router, the OpenAPI document and the clients' calls are all made from
this table (tests check each against it), so the API is declared once.
"""

from __future__ import annotations

from urllib.parse import quote

import msgspec

from brook import wire
from brook.operations import endpoints, queues, timers, topics
from brook.operations.rows import (
    PATH_PARAMETERS,
    POSITION_PATTERN,
    Operation,
    Param,
)

TABLE: tuple[Operation, ...] = (*topics.ROWS, *queues.ROWS, *timers.ROWS, *endpoints.ROWS)
ALTERNATIVES: dict[tuple[str, str], tuple[type[msgspec.Struct], type[msgspec.Struct]]] = {
    ("POST", "/v1/timers"): (wire.TimersIn, wire.ScheduledMany),
}
"""A second body shape a route takes, and the answer it gives to that one."""

OPERATIONS: dict[str, Operation] = {op.name: op for op in TABLE}
"""Every operation by name."""
BY_ROUTE: dict[tuple[str, str], Operation] = {(op.method, op.path): op for op in TABLE}
"""Every operation by (method, path template)."""
if len(OPERATIONS) != len(TABLE) or len(BY_ROUTE) != len(TABLE):
    raise ImportError("brook.operations: two operations share a name or a route")


def path_of(name: str, **parameters: str | int) -> str:
    """The path of operation `name` with its parameters filled in, each quoted whole."""
    path = OPERATIONS[name].path
    for key, value in parameters.items():
        path = path.replace("{" + key + "}", quote(str(value), safe=""))
    if "{" in path:
        raise ValueError(f"{name} needs every path parameter: {path}")
    return path


__all__ = [
    "ALTERNATIVES",
    "BY_ROUTE",
    "OPERATIONS",
    "PATH_PARAMETERS",
    "POSITION_PATTERN",
    "TABLE",
    "Operation",
    "Param",
    "path_of",
]
