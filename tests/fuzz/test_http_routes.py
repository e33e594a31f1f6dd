"""Arbitrary bodies and query strings at every route of a real `brook serve`: never a
5xx, never a hang, and a refused request changes nothing.

The routes come from the server's own /openapi.json, so a route added later is
fuzzed too. Bodies are raw bytes, arbitrary JSON, or JSON objects built from the
field names the wire contract knows (so they get past the first checks); the
content-type varies. After each request the broker's state (topics and their
ends, a queue group's settings, a stream group's positions, a timer) is compared
with the state before: a 4xx must leave it as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brook import wire
from tests.served import Served

FIELDS = sorted(
    {
        name
        for kind in wire.REQUESTS
        for name in msgspec.structs.fields(kind)
        for name in [name.name]
    }
    | {"topic", "value", "at", "delay_ms", "timer_id", "timers"}
)
NAMES = st.sampled_from(["t", "q", "g", "tm", "x.y", "a" * 201, "%2F", "..", "__x", "ü"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
KNOWN_OBJECTS = st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=5)
MEDIA = st.sampled_from(
    [
        wire.JSON_TYPE,
        wire.JSON_TYPE + "; charset=utf-8",
        wire.BATCH_TYPE,
        wire.RAW_TYPE,
        "text/plain",
        "",
    ]
)
QUERY_NAMES = st.sampled_from(
    ["partition", "offset", "limit", "max_records", "start", "create", "key", "wait_ms", "zz"]
)
QUERY_VALUES = st.sampled_from(
    ["", "0", "1", "-1", "99999999999999999999", "abc", "true", "latest"]
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served(Path(tmp_path_factory.mktemp("fuzz")) / "data")
    assert (
        served.request("POST", "/v1/topics/t/records", {"records": [{"value": "x"}] * 3})[0] == 200
    )
    assert served.request("PUT", "/v1/topics/t/queues/q", {})[0] == 200
    timer = {"topic": "t", "value": "v", "delay_ms": 3_600_000, "timer_id": "tm"}
    assert served.request("POST", "/v1/timers", timer)[0] == 200
    _, document = served.request("GET", "/openapi.json")
    served.routes = [  # type: ignore[attr-defined]
        (method.upper(), path) for path, methods in document["paths"].items() for method in methods
    ]
    yield served
    served.close()


def state(served: Served) -> Any:
    """What a refused request must not change (volatile counts, like leases that
    expire on their own, are left out)."""
    topics = served.request("GET", "/v1/topics")[1]
    queue = served.request("GET", "/v1/topics/t/queues/q")[1]
    group = served.request("GET", "/v1/topics/t/groups/g")[1]
    timer = served.request("GET", "/v1/timers/tm")[1]
    return topics, queue.get("settings", queue), group, timer


@st.composite
def requests(draw: Any, routes: list[tuple[str, str]]) -> tuple[str, str, bytes, dict[str, str]]:
    method, template = draw(st.sampled_from(routes))
    path = template
    while "{" in path:
        start = path.index("{")
        end = path.index("}", start)
        name = draw(NAMES)
        if method == "DELETE" and name == "t":
            name = "gone"  # keep the topic the state is read from
        path = path[:start] + quote(name, safe="%") + path[end + 1 :]
    query = draw(st.dictionaries(QUERY_NAMES, QUERY_VALUES, max_size=3))
    query.pop("wait_ms", None)  # a valid long-poll would only make the test wait
    if query:
        path += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    kind = draw(st.integers(0, 2))
    if kind == 0:
        body = draw(st.binary(max_size=64))
    elif kind == 1:
        body = json.dumps(draw(JSON_VALUES)).encode()
    else:
        document = draw(KNOWN_OBJECTS)
        document.pop("wait_ms", None)
        body = json.dumps(document).encode()
    media = draw(MEDIA)
    return method, path, body, ({"content-type": media} if media else {})


def test_no_route_answers_5xx_or_changes_state_when_it_refuses(server: Served) -> None:
    routes = server.routes  # type: ignore[attr-defined]
    seen: dict[int, int] = {}

    @settings(
        max_examples=400,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(requests(routes))
    def check(request: tuple[str, str, bytes, dict[str, str]]) -> None:
        method, path, body, headers = request
        before = state(server)
        status, answer = server.request(method, path, body, headers, timeout=20)
        seen[status] = seen.get(status, 0) + 1
        assert status < 500, (method, path, body, status, answer)
        if status >= 400:
            assert isinstance(answer, dict) and "error" in answer, answer
            assert state(server) == before, (method, path, body, status)

    check()
    assert not any("Traceback" in line for line in server.log), "".join(server.log)
    assert sum(n for status, n in seen.items() if 400 <= status < 500) > 100, seen
