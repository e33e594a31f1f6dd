"""Routes: (method, path template) -> handler and the API-key scope it needs."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from brook.errors import BrookError, NotFound

Handler = Callable[..., Awaitable[Any]]


class MethodNotAllowed(BrookError):
    status = 405
    code = "method_not_allowed"


class Route(NamedTuple):
    handler: Handler
    template: str
    scope: str | None
    """The API-key scope the route needs: produce, consume, admin, "any" (any valid
    key), or None (open to all, like /v1/health)."""


class Router:
    def __init__(self) -> None:
        self._routes: list[tuple[re.Pattern[str], dict[str, Route], str]] = []

    def add(self, method: str, template: str, handler: Handler, scope: str | None) -> None:
        pattern = re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template) + "$")
        route = Route(handler, template, scope)
        for _, methods, known in self._routes:
            if known == template:
                methods[method] = route
                return
        self._routes.append((pattern, {method: route}, template))

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]]:
        """The route and its path parameters; NotFound or MethodNotAllowed otherwise."""
        for pattern, methods, _ in self._routes:
            found = pattern.match(path)
            if found is None:
                continue
            route = methods.get(method)
            if route is None:
                allowed = ", ".join(sorted(methods))
                raise MethodNotAllowed(f"{method} is not allowed on {path}; use {allowed}")
            return route, found.groupdict()
        raise NotFound(f"no such endpoint: {path}")

    def routes(self) -> list[tuple[str, str, Route]]:
        """(method, template, route) of every route, in the order they were added."""
        return [
            (method, template, route)
            for _, methods, template in self._routes
            for method, route in methods.items()
        ]
