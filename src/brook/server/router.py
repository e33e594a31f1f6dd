"""Routes: (method, path template) -> handler, with {name} path parameters."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from brook.errors import BrookError, NotFound

Handler = Callable[..., Awaitable[Any]]


class MethodNotAllowed(BrookError):
    status = 405
    code = "method_not_allowed"


class Router:
    def __init__(self) -> None:
        self._routes: list[tuple[re.Pattern[str], dict[str, Handler], str]] = []

    def add(self, method: str, template: str, handler: Handler) -> None:
        pattern = re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template) + "$")
        for _, methods, known in self._routes:
            if known == template:
                methods[method] = handler
                return
        self._routes.append((pattern, {method: handler}, template))

    def match(self, method: str, path: str) -> tuple[Handler, dict[str, str], str]:
        """The handler, path parameters and route template; NotFound or MethodNotAllowed otherwise."""
        for pattern, methods, template in self._routes:
            found = pattern.match(path)
            if found is None:
                continue
            handler = methods.get(method)
            if handler is None:
                raise MethodNotAllowed(
                    f"{method} is not allowed on {path}; use {', '.join(sorted(methods))}"
                )
            return handler, found.groupdict(), template
        raise NotFound(f"no such endpoint: {path}")

    def templates(self) -> list[tuple[str, list[str]]]:
        return [(template, sorted(methods)) for _, methods, template in self._routes]
