"""A key reaches only the endpoints within its topic patterns and tenant (SPEC §11).

Found from outside (issue 50): a key made with `--scopes admin --topics 'events.c0001.*'`
listed every customer's endpoints with their URLs and custom headers (bearer tokens
included), disabled another customer's endpoint, and re-subscribed its own endpoint to
another customer's topics. Every endpoint route is called here with keys that reach the
endpoint and keys that do not, through a real `brook serve`.
"""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook.config import key_stanza
from brook.names import pattern_matches, pattern_within
from brook.server import openapi
from tests.served import Served
from tests.ui.test_http import get, login, post

KEYS = {
    "root": ("key-of-the-operator", ["admin"], ["*"], None),
    "c0001": ("key-of-customer-0001", ["admin"], ["events.c0001.*"], None),
    "t1": ("key-of-tenant-one", ["admin"], ["events.*"], "t1"),
}
HEADER_SECRET = "Bearer token-of-customer-0002"
ENDPOINTS = {
    # name: (topics, tenant)
    "c0001": (["events.c0001.*"], None),
    "c0002": (["events.c0002.*"], "t2"),
    "t1-hook": (["events.t1.*"], "t1"),
}
REACHES = {"c0001": {"c0001"}, "t1": {"t1-hook"}, "root": {"c0001", "c0002", "t1-hook"}}
"""The operator's key last: its DELETE removes what the others were refused."""
BODIES = {
    "PUT": {"max_attempts": 5},
    "POST": {},
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("reach")
    config = folder / "brook.toml"
    config.write_text(
        "delivery_allow_private_networks = true\n"
        + "".join(
            key_stanza(name, key, scopes, topics, tenant)
            for name, (key, scopes, topics, tenant) in KEYS.items()
        )
    )
    server = Served(folder / "data", config=config)
    yield server
    server.close()


def _made(server: Served) -> Served:
    """The endpoints as made (again, after a route deleted or changed them)."""
    for name, (topics, tenant) in ENDPOINTS.items():
        body = {"url": "http://127.0.0.1:9/hook", "topics": topics, "enabled": False}
        body["headers"] = {"Authorization": HEADER_SECRET}
        body["tenant"] = tenant
        status, answer = server.request("PUT", f"/v1/endpoints/{name}", body, _as("root"))
        assert status == 200, answer
    return server


def _as(key: str) -> dict[str, str | None]:
    return {"authorization": f"Bearer {KEYS[key][0]}"}


ENDPOINT_ROUTES = sorted(
    (method, path) for method, path in openapi.OPERATIONS if "{endpoint}" in path
)


@pytest.mark.parametrize("route", ENDPOINT_ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
def test_every_endpoint_route_inside_and_outside_a_keys_reach(
    served: Served, route: tuple[str, str]
) -> None:
    method, template = route
    body = BODIES.get(method)
    for key, reached in REACHES.items():
        _made(served)
        for endpoint in ENDPOINTS:
            path = template.replace("{endpoint}", endpoint)
            if template.endswith("/attempts"):
                path += "?topic=events.x&partition=0&offset=0"
            status, answer = served.request(method, path, body, _as(key))
            if endpoint in reached:
                assert status != 403, (key, method, path, answer)
            else:
                assert status == 403, (key, method, path, status, answer)
                assert answer["error"]["code"] == "forbidden"
                assert HEADER_SECRET not in str(answer)
                topics, tenant = ENDPOINTS[endpoint]
                told = answer["error"]["message"]
                assert not any(t in told for t in topics), f"its patterns told: {told}"
                assert tenant is None or repr(tenant) not in told, f"its tenant told: {told}"


def test_what_a_key_was_refused_changed_nothing(served: Served) -> None:
    _made(served)
    for key in ("c0001", "t1"):
        for endpoint in ENDPOINTS:
            if endpoint not in REACHES[key]:
                served.request("POST", f"/v1/endpoints/{endpoint}/enable", {}, _as(key))
                served.request("DELETE", f"/v1/endpoints/{endpoint}", None, _as(key))
    status, listed = served.request("GET", "/v1/endpoints", None, _as("root"))
    assert status == 200
    by_name = {e["name"]: e for e in listed["endpoints"]}
    for name, (topics, tenant) in ENDPOINTS.items():
        assert by_name[name]["topics"] == topics and by_name[name]["tenant"] == tenant
        assert by_name[name]["enabled"] is False


def test_a_listing_shows_only_what_the_key_reaches(served: Served) -> None:
    _made(served)
    for key, reached in REACHES.items():
        status, listed = served.request("GET", "/v1/endpoints", None, _as(key))
        assert status == 200
        names = {e["name"] for e in listed["endpoints"]}
        assert names & set(ENDPOINTS) == reached, key
        if key != "root":
            assert HEADER_SECRET not in str(
                [e for e in listed["endpoints"] if e["name"] == "c0002"]
            )


def test_a_key_cannot_subscribe_an_endpoint_beyond_its_patterns(served: Served) -> None:
    _made(served)
    status, answer = served.request(
        "PUT", "/v1/endpoints/c0001", {"topics": ["events.c0002.*"]}, _as("c0001")
    )
    assert status == 403
    assert "events.c0002.*" in answer["error"]["message"]
    status, answer = served.request(
        "PUT",
        "/v1/endpoints/c0001-wide",
        {"url": "http://127.0.0.1:9/x", "topics": ["events.*"]},
        _as("c0001"),
    )
    assert status == 403 and "events.*" in answer["error"]["message"]
    status, answer = served.request(
        "PUT",
        "/v1/endpoints/c0001-invoices",
        {"url": "http://127.0.0.1:9/x", "topics": ["events.c0001.invoice.*"], "enabled": False},
        _as("c0001"),
    )
    assert status == 200, answer
    status, answer = served.request("GET", "/v1/endpoints/c0001", None, _as("root"))
    assert answer["topics"] == ["events.c0001.*"]  # the refused change left it as it was


def test_a_tenants_key_makes_its_tenants_endpoints_only(served: Served) -> None:
    made = {"url": "http://127.0.0.1:9/x", "topics": ["events.t1.orders"], "enabled": False}
    status, answer = served.request("PUT", "/v1/endpoints/t1-new", made, _as("t1"))
    assert status == 200, answer
    assert answer["tenant"] == "t1"  # set for it
    status, answer = served.request(
        "PUT", "/v1/endpoints/t1-other", {**made, "tenant": "t2"}, _as("t1")
    )
    assert status == 403 and "t1" in answer["error"]["message"]
    status, answer = served.request("GET", "/v1/endpoints/t1-other", None, _as("root"))
    assert status == 404  # refused: not made


def test_a_message_shows_only_the_attempts_of_endpoints_the_key_reaches(
    served: Served,
) -> None:
    status, answer = served.request(
        "GET", "/v1/messages/events.c0001.x:0:0/attempts", None, _as("c0001")
    )
    assert status == 200
    assert all(
        e["endpoint"] == "c0001" or e["endpoint"].startswith("c0001") for e in answer["endpoints"]
    )


names = st.text(alphabet="abc.", min_size=1, max_size=6)
globs = st.text(alphabet="abc.*?", min_size=1, max_size=6)


@given(pattern=globs, own=st.lists(globs, min_size=1, max_size=3), topic=names)
def test_a_pattern_within_a_keys_patterns_takes_only_topics_the_key_may_use(
    pattern: str, own: list[str], topic: str
) -> None:
    if pattern_within(pattern, own) and pattern_matches(pattern, topic):
        assert any(re.fullmatch(_regex(p), topic) for p in own)


def _regex(glob: str) -> str:
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)


def test_plain_prefixes_and_names_lie_within_and_wider_globs_do_not() -> None:
    own = ["events.c0001.*", "billing.paid"]
    assert pattern_within("events.c0001.*", own)
    assert pattern_within("events.c0001.invoice.*", own)
    assert pattern_within("events.c0001.invoice.paid", own)
    assert pattern_within("billing.paid", own)
    assert not pattern_within("events.*", own)
    assert not pattern_within("events.c000*", own)
    assert not pattern_within("events.c0002.*", own)
    assert not pattern_within("billing.*", own)
    assert not pattern_within("*", own)


def test_a_tenant_in_brook_toml_is_checked(tmp_path: Path) -> None:
    from brook import config
    from brook.errors import BadRequest

    path = tmp_path / "brook.toml"
    path.write_text(key_stanza("k", "secret-key", ["admin"], ["*"], "__bad"))
    with pytest.raises(BadRequest, match="tenant"):
        config.load(str(path))


def test_the_dashboard_shows_and_acts_on_only_what_the_key_reaches(served: Served) -> None:
    _made(served)
    cookie, token = login(served, KEYS["c0001"][0])
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.request("GET", "/ui/endpoints", headers={"cookie": cookie})
    response = connection.getresponse()
    page = response.read().decode()
    connection.close()
    assert response.status == 200
    assert "/ui/endpoints/c0001" in page
    assert "c0002" not in page and "t1-hook" not in page and HEADER_SECRET not in page
    assert get(served, "/ui/endpoints/c0002", {"cookie": cookie}).status == 403
    status, _, body = post(served, "/ui/endpoints/c0002/enable", {"csrf": token}, cookie)
    assert status == 403 and HEADER_SECRET not in body
    status, info = served.request("GET", "/v1/endpoints/c0002", None, _as("root"))
    assert info["enabled"] is False
    status, _, _ = post(served, "/ui/endpoints/c0001/enable", {"csrf": token}, cookie)
    assert status == 303


def test_what_every_tenant_shares_is_changed_by_the_operator_s_key_only(served: Served) -> None:
    """The event-type catalog shows in every tenant's portal, /metrics tells of every
    tenant: a key limited to some topics or a tenant, admin or not, changes or reads
    neither (and may still read the catalog)."""
    body = {"description": "An invoice was paid"}
    for key in ("c0001", "t1"):
        for method, path, sent in (
            ("PUT", "/v1/event-types/invoice.paid", body),
            ("DELETE", "/v1/event-types/invoice.paid", None),
            ("GET", "/metrics", None),
        ):
            status, answer = served.request(method, path, sent, _as(key))
            assert status == 403, (key, method, path, answer)
        status, _ = served.request("GET", "/v1/event-types", None, _as(key))
        assert status == 200
    status, answer = served.request("PUT", "/v1/event-types/invoice.paid", body, _as("root"))
    assert status == 200, answer
    status, _ = served.request("GET", "/metrics", None, _as("root"))
    assert status == 200


def test_a_key_reaches_the_schedules_of_its_topics_only(served: Served) -> None:
    def put(key: str, name: str, topic: str) -> tuple[int, Any]:
        body = {"topic": topic, "value": "tick", "every_ms": 3_600_000}
        return served.request("PUT", f"/v1/schedules/{name}", body, _as(key))

    assert put("root", "theirs", "events.c0002.tick")[0] == 200
    status, answer = put("c0001", "mine", "events.c0001.tick")
    assert status == 200, answer
    assert put("c0001", "beyond", "events.c0002.tick")[0] == 403
    assert put("c0001", "theirs", "events.c0001.tick")[0] == 403, "nor taken over"
    for method, path in (
        ("GET", "/v1/schedules/theirs"),
        ("POST", "/v1/schedules/theirs/pause"),
        ("POST", "/v1/schedules/theirs/resume"),
        ("DELETE", "/v1/schedules/theirs"),
    ):
        status, answer = served.request(method, path, None, _as("c0001"))
        assert status == 403, (method, path, answer)
    _, listed = served.request("GET", "/v1/schedules", None, _as("c0001"))
    assert [s["name"] for s in listed["schedules"]] == ["mine"]
    _, listed = served.request("GET", "/v1/schedules", None, _as("root"))
    assert {s["name"] for s in listed["schedules"]} >= {"mine", "theirs"}
    status, info = served.request("GET", "/v1/schedules/theirs", None, _as("root"))
    assert status == 200 and info["topic"] == "events.c0002.tick" and not info["paused"]
    cookie, _ = login(served, KEYS["c0001"][0])
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.request("GET", "/ui/timers", headers={"cookie": cookie})
    page = connection.getresponse().read().decode()
    connection.close()
    assert "events.c0001.tick" in page and "events.c0002.tick" not in page, "nor on the dashboard"
