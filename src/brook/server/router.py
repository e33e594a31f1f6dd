"""Routes: (method, path template) -> handler and the API-key scope it needs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from brook import limits
from brook.errors import MethodNotAllowed, NotFound
from brook.operations import Operation

Handler = Callable[..., Awaitable[Any]]
SCOPES = (None, "any", "produce", "consume", "admin")
"""What a route may need, the API's and the dashboard's alike: nothing, any valid key (or
login), or a key with that scope."""


class Route(NamedTuple):
    handler: Handler
    template: str
    scope: str | None
    """The API-key scope the route needs: produce, consume, admin, "any" (any valid
    key), or None (open to all, like /v1/health)."""
    kind: str = "api"
    """"api" (an operation of the table: JSON) or "page" (the dashboard's: HTML)."""


class Router:
    """Matches by path segments: templates are grouped by segment count, and a
    template's literal segments must equal the path's (cheaper than regexes)."""

    def __init__(self) -> None:
        self._routes: list[tuple[tuple[str, ...], dict[str, Route], str]] = []
        self._by_length: dict[int, list[tuple[tuple[str, ...], dict[str, Route]]]] = {}
        self._matched: dict[tuple[str, str], tuple[Route, dict[str, str]]] = {}
        """Recent matches: most requests repeat a few paths (one topic, one group)."""

    def serve(self, operation: Operation, handler: Handler) -> None:
        """Answer `operation` (brook/operations.py) with `handler`, at its route and scope."""
        self.add(operation.method, operation.path, handler, operation.scope)

    def add(
        self, method: str, template: str, handler: Handler, scope: str | None, kind: str = "api"
    ) -> None:
        if scope not in SCOPES:
            raise ValueError(f"{method} {template}: scope {scope!r} is none of {SCOPES}")
        segments = tuple(template.strip("/").split("/"))
        route = Route(handler, template, scope, kind)
        for _, methods, known in self._routes:
            if known == template:
                methods[method] = route
                return
        methods = {method: route}
        self._routes.append((segments, methods, template))
        self._by_length.setdefault(len(segments), []).append((segments, methods))

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]]:
        """The route and its path parameters (not to be changed); NotFound or MethodNotAllowed."""
        found = self._matched.get((method, path))
        if found is None:
            found = self._match(method, path)
            if len(self._matched) >= limits.route_matches_remembered_max:
                self._matched.clear()
            self._matched[(method, path)] = found
        return found

    def _match(self, method: str, path: str) -> tuple[Route, dict[str, str]]:
        parts = path.strip("/").split("/")
        for segments, methods in self._by_length.get(len(parts), ()):
            params: dict[str, str] = {}
            for segment, part in zip(segments, parts, strict=True):
                if segment[0] == "{":
                    if not part:
                        break
                    params[segment[1:-1]] = part
                elif segment != part:
                    break
            else:
                route = methods.get(method)
                if route is None and method == "HEAD":  # GET's answer without its body
                    route = methods.get("GET")
                if route is None:
                    allowed = ", ".join(sorted({*methods, *(["HEAD"] if "GET" in methods else [])}))
                    raise MethodNotAllowed(
                        f"{method} is not allowed on {path}; use {allowed}", allowed
                    )
                return route, params
        raise NotFound(f"no such endpoint: {path}")

    def routes(self, kind: str | None = None) -> list[tuple[str, str, Route]]:
        """(method, template, route) of every route (of `kind`), in the order they were added."""
        return [
            (method, template, route)
            for _, methods, template in self._routes
            for method, route in methods.items()
            if kind is None or route.kind == kind
        ]
