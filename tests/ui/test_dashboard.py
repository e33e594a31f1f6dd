"""The dashboard in process: its routes and their scopes, answers that fit (405 with
Allow), and a ticker whose failure is the dashboard's alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import brook
from brook.server.auth import Authenticator
from brook.server.http import Request
from brook.server.ui.dashboard import PREFIX, Dashboard


async def direct(fn: Any, *args: Any) -> Any:
    return fn(*args)


def request(method: str, path: str) -> Request:
    return Request(method, path, {}, {}, b"")


def test_every_page_needs_a_login_and_every_action_the_admin_scope() -> None:
    with brook.open("memory://") as b:
        dashboard = Dashboard(b, Authenticator([]), direct, "memory")
        routes = dashboard.router.routes()
        actions = [
            route.scope
            for method, template, route in routes
            if method == "POST" and template not in (PREFIX + "/login", PREFIX + "/logout")
        ]
        assert actions and set(actions) == {"admin"}
        open_to_all = {(m, t) for m, t, route in routes if route.scope is None}
        assert open_to_all == {
            ("GET", PREFIX + "/static/{name}"),
            ("GET", PREFIX + "/login"),
            ("POST", PREFIX + "/login"),
            ("GET", PREFIX + "/portal/{token}"),  # its own signature is its login
        }


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_a_method_a_page_does_not_take_is_405_with_allow(method: str) -> None:
    async def ask() -> Any:
        with brook.open("memory://") as b:
            dashboard = Dashboard(b, Authenticator([]), direct, "memory")
            try:
                return await dashboard(request(method, PREFIX + "/queues"))
            finally:
                dashboard.close()

    response = asyncio.run(ask())
    assert response.status == 405
    assert ("allow", "GET, HEAD") in response.headers
    assert response.content_type.startswith("text/html")


def test_a_failing_ticker_is_the_dashboards_failure_alone() -> None:
    async def run(b: brook.Broker) -> None:
        dashboard = Dashboard(b, Authenticator([]), direct, "memory")

        def broken(broker: object) -> None:
            raise RuntimeError("cannot sample")

        dashboard.rates.sample = broken  # type: ignore[assignment,method-assign]
        response = await dashboard(request("GET", PREFIX))
        assert response.status == 200  # the page is served all the same
        for _ in range(100):
            await asyncio.sleep(0.01)
            if b.isolated():
                break
        dashboard.close()

    with brook.open("memory://") as b:
        asyncio.run(run(b))
        failures = [(f.loop, f.task, f.error) for f in b.isolated()]
        assert failures and failures[0][:2] == ("dashboard", "append rates")
        assert "cannot sample" in failures[0][2]
        assert b.failing() == []  # the broker itself serves on


def test_the_pages_are_routes_of_the_servers_router() -> None:
    """One router and one pipeline (server/pipeline.py) for the API and the dashboard:
    a page is a route of kind "page"; the OpenAPI document describes the API's only."""
    from brook.server.api import Api

    loop = asyncio.new_event_loop()
    with brook.open("memory://") as b:
        api = Api(b, loop, Authenticator([]))
        try:
            kinds = {(t.startswith(PREFIX), route.kind) for _, t, route in api.router.routes()}
            assert kinds == {(True, "page"), (False, "api")}
            assert api.ui.router is api.router
        finally:
            api.close()
            loop.close()
