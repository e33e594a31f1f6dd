"""One request pipeline for the API and the dashboard: the route, then who asks and
whether they may, then the handler.

The two differ only in how a caller is known (a bearer key; a session cookie, or a
portal's) and how an answer is shaped (JSON; a page): each gives a `Caller`, and
`route` does the rest in one order for both. A path or method that does not exist is
answered only to someone who could use it (with keys, an unknown caller learns nothing
of what exists); a route's scope is one of `router.SCOPES`; a route naming a topic
needs a caller whose key covers it.
"""

from __future__ import annotations

from typing import Any, Protocol

from brook.errors import MethodNotAllowed, NotFound
from brook.server.http import Request
from brook.server.router import Route, Router


class Caller(Protocol):
    """Who asks, as one pipeline knows them."""

    @property
    def keys(self) -> bool:
        """Whether keys are configured (else everyone may, and nobody is asked who they are)."""

    def identify(self, request: Request) -> Any:
        """Who the caller is, or Unauthorized: before a 404 or 405 is told them."""

    def prepare(self, request: Request, route: Route) -> None:
        """What the request must hold before anyone is admitted (the dashboard: a post's
        CSRF token; the API: only the query parameters its route takes); BadRequest or
        Forbidden."""

    def admit(self, request: Request, scope: str, topic: str | None) -> Any:
        """The caller, admitted to a route of `scope` (and `topic`, when the path names
        one); Unauthorized or Forbidden."""


def route(
    router: Router, request: Request, path: str, caller: Caller
) -> tuple[Route, dict[str, str], Any]:
    """The route of `request` (at `path`), its path parameters, and the caller admitted as
    the route's scope asks (None for an open route)."""
    try:
        found, params = router.match(request.method, path)
    except (NotFound, MethodNotAllowed):
        if caller.keys:  # with keys, only a key holder learns what exists
            caller.identify(request)
        raise
    caller.prepare(request, found)
    if found.scope is None:
        return found, params, None
    return found, params, caller.admit(request, found.scope, params.get("topic"))
