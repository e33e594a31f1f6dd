"""The auth matrix over every route, secrets kept out of logs, keys compared in constant time.

The routes come from the server's own OpenAPI table, and `SCOPES` below says, by
hand, which scope each needs: a route added without a line here fails the
first test, so none goes unchecked. Every route is called with no key, a wrong
key, and each kind of key, on a topic the key's patterns admit and on one they
do not; authorization must be decided before anything else (a refused caller
never learns whether its body was valid).
"""

from __future__ import annotations

import base64
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

import brook
from brook.config import ApiKey, key_stanza
from brook.server import auth, openapi
from tests.served import Served

SCOPES = {
    ("GET", "/v1/health"): None,
    ("GET", "/openapi.json"): "any",
    ("GET", "/metrics"): "admin",
    ("GET", "/v1/topics"): "any",
    ("PUT", "/v1/topics/{topic}"): "admin",
    ("GET", "/v1/topics/{topic}"): "any",
    ("DELETE", "/v1/topics/{topic}"): "admin",
    ("POST", "/v1/topics/{topic}/records"): "produce",
    ("GET", "/v1/topics/{topic}/records"): "consume",
    ("GET", "/v1/topics/{topic}/groups/{group}/poll"): "consume",
    ("POST", "/v1/topics/{topic}/groups/{group}/commit"): "consume",
    ("POST", "/v1/topics/{topic}/groups/{group}/seek"): "consume",
    ("GET", "/v1/topics/{topic}/groups/{group}"): "consume",
    ("PUT", "/v1/topics/{topic}/queues/{group}"): "consume",
    ("GET", "/v1/topics/{topic}/queues/{group}"): "consume",
    ("POST", "/v1/topics/{topic}/queues/{group}/lease"): "consume",
    ("POST", "/v1/topics/{topic}/queues/{group}/ack"): "consume",
    ("POST", "/v1/topics/{topic}/queues/{group}/nack"): "consume",
    ("POST", "/v1/topics/{topic}/queues/{group}/release"): "consume",
    ("POST", "/v1/topics/{topic}/queues/{group}/extend"): "consume",
    ("POST", "/v1/topics/{topic}/queues/{group}/discard"): "consume",
    ("GET", "/v1/topics/{topic}/queues/{group}/trace"): "consume",
    ("GET", "/v1/topics/{topic}/queues/{group}/job"): "consume",
    ("POST", "/v1/topics/{topic}/queues/{group}/redrive"): "consume",
    ("POST", "/v1/topics/{topic}/queues/{group}/cancel"): "consume",
    ("GET", "/v1/topics/{topic}/queues/{group}/errors"): "consume",
    ("GET", "/v1/topics/{topic}/queues/{group}/dead"): "consume",
    ("PUT", "/v1/topics/{topic}/staged/{writer}/{seq}/{part}/{chunk}"): "produce",
    ("POST", "/v1/topics/{topic}/staged/{writer}/{seq}/publish"): "produce",
    ("DELETE", "/v1/topics/{topic}/staged/{writer}/{seq}"): "produce",
    ("POST", "/v1/timers"): "produce",
    ("GET", "/v1/timers"): "produce",
    ("GET", "/v1/timers/{timer}"): "produce",
    ("DELETE", "/v1/timers/{timer}"): "produce",
    ("GET", "/v1/endpoints"): "admin",
    ("GET", "/v1/event-types"): "any",
    ("POST", "/v1/portal"): "admin",
    ("PUT", "/v1/event-types/{event_type}"): "admin",
    ("GET", "/v1/event-types/{event_type}"): "any",
    ("DELETE", "/v1/event-types/{event_type}"): "admin",
    ("POST", "/v1/topics/{topic}/queues/{group}/unique"): "produce",
    ("POST", "/v1/joins"): "produce",
    ("GET", "/v1/joins/{join}"): "consume",
    ("GET", "/v1/schedules"): "admin",
    ("PUT", "/v1/schedules/{schedule}"): "admin",
    ("GET", "/v1/schedules/{schedule}"): "admin",
    ("DELETE", "/v1/schedules/{schedule}"): "admin",
    ("POST", "/v1/schedules/{schedule}/pause"): "admin",
    ("POST", "/v1/schedules/{schedule}/resume"): "admin",
    ("PUT", "/v1/endpoints/{endpoint}"): "admin",
    ("GET", "/v1/endpoints/{endpoint}"): "admin",
    ("DELETE", "/v1/endpoints/{endpoint}"): "admin",
    ("GET", "/v1/endpoints/{endpoint}/stats"): "admin",
    ("GET", "/v1/endpoints/{endpoint}/attempts"): "admin",
    ("GET", "/v1/endpoints/{endpoint}/errors"): "admin",
    ("GET", "/v1/messages/{message}/attempts"): "admin",
    ("POST", "/v1/endpoints/{endpoint}/redrive"): "admin",
    ("POST", "/v1/endpoints/{endpoint}/replay"): "admin",
    ("POST", "/v1/endpoints/{endpoint}/resend"): "admin",
    ("POST", "/v1/endpoints/{endpoint}/enable"): "admin",
    ("POST", "/v1/endpoints/{endpoint}/disable"): "admin",
    ("POST", "/v1/endpoints/{endpoint}/test"): "admin",
    ("POST", "/v1/endpoints/{endpoint}/rotate-secret"): "admin",
    ("GET", "/v1/lake"): "consume",
    ("POST", "/v1/lake/sync"): "admin",
}

KEYS = {
    "admin": ("key-of-the-admin-in-the-matrix", ["admin"], ["*"]),
    "producer": ("key-of-a-producer-in-the-matrix", ["produce"], ["events.*"]),
    "consumer": ("key-of-a-consumer-in-the-matrix", ["consume"], ["events.*"]),
}
SECRET = "whsec_" + base64.b64encode(b"a webhook secret nobody may log").decode()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("matrix")
    config = folder / "brook.toml"
    config.write_text(
        "delivery_allow_private_networks = true\n"
        + "".join(
            key_stanza(name, key, scopes, topics) for name, (key, scopes, topics) in KEYS.items()
        )
    )
    server = Served(folder / "data", "--access-log", "--log-level", "debug", config=config)
    yield server
    server.close()


def test_the_matrix_names_every_route() -> None:
    """SCOPES says again, by hand, the scope each route needs: a slip in a row (a route
    open to any key that should be admin's) fails here, not in production."""
    missing = set(openapi.OPERATIONS) - set(SCOPES)
    assert not missing, f"add to SCOPES each new route with the scope it means: {missing}"
    assert set(SCOPES) <= set(openapi.OPERATIONS), "SCOPES names routes the API no longer has"


def path_for(template: str, topic: str) -> str:
    values = {
        "topic": topic,
        "group": "g",
        "timer": "tm1",
        "join": "j1",
        "message": f"{topic}:0:0",
        "endpoint": "hook",
        "event_type": "invoice.paid",
        "schedule": "nightly",
        "writer": "w1",
        "seq": "1",
        "part": "p",
        "chunk": "0",
    }
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template)


def expected(scope: str | None, key: str, topic_bound: bool, topic: str) -> str:
    """ "ok" (past authorization, whatever the route then says) or "forbidden"."""
    _, scopes, patterns = KEYS[key]
    if scope not in (None, "any") and scope not in scopes:
        return "forbidden"
    if topic_bound and not any(
        re.fullmatch(p.replace(".", r"\.").replace("*", ".*"), topic) for p in patterns
    ):
        return "forbidden"
    return "ok"


@pytest.mark.parametrize("route", sorted(SCOPES), ids=lambda r: f"{r[0]} {r[1]}")
def test_every_route_against_every_caller(secured: Served, route: tuple[str, str]) -> None:
    method, template = route
    scope = SCOPES[route]
    body = {} if method in ("POST", "PUT") else None
    for topic in ("events.a", "private"):
        path = path_for(template, topic)
        if scope is None:
            assert secured.request(method, path, body)[0] == 200
            continue
        for authorization in (None, "Bearer not-a-key", "Basic YWRtaW46YWRtaW4=", "Bearer "):
            status, answer = secured.request(method, path, body, {"authorization": authorization})
            assert status == 401, (path, authorization, answer)
            assert answer["error"]["code"] == "unauthorized"
        for name, (key, _, _) in KEYS.items():
            status, answer = secured.request(method, path, body, {"authorization": f"Bearer {key}"})
            want = expected(scope, name, "{topic}" in template, topic)
            if want == "forbidden":
                assert status == 403, (path, name, status, answer)
                assert answer["error"]["code"] == "forbidden"
            else:
                assert status not in (401, 403), (path, name, status, answer)


def test_secrets_never_reach_the_log(secured: Served) -> None:
    admin = {"authorization": f"Bearer {KEYS['admin'][0]}"}
    status, _ = secured.request(
        "PUT",
        "/v1/endpoints/logged",
        {"url": "http://127.0.0.1:9/hook", "topics": ["events.*"], "secret": SECRET},
        admin,
    )
    assert status == 200
    status, made = secured.request(
        "PUT", "/v1/endpoints/made", {"url": "http://127.0.0.1:9/x", "topics": ["x"]}, admin
    )
    assert status == 200 and made["secret"].startswith("whsec_")
    secured.request("POST", "/v1/endpoints/logged/rotate-secret", {}, admin)
    secured.request("GET", "/v1/topics", None, {"authorization": "Bearer a-wrong-key-guessed"})
    producer = {"authorization": f"Bearer {KEYS['producer'][0]}"}
    secured.request("POST", "/v1/topics/events.log/records", b"x", producer)
    log = "".join(secured.log)
    assert "GET /v1/topics 401" in log or '"status":401' in log, "the access log is on"
    for secret in [
        SECRET,
        made["secret"],
        "a-wrong-key-guessed",
        *(k for k, _, _ in KEYS.values()),
    ]:
        assert secret not in log, f"{secret[:12]}... is in the server's log"
        assert secret.split("_", 1)[-1] not in log


def test_keys_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every configured hash is compared whatever the key: no early exit tells a
    caller how many keys it got past."""
    keys = [
        ApiKey(f"k{i}", auth.hashlib.sha256(b"key%d" % i).hexdigest(), ["consume"], ["*"])
        for i in range(5)
    ]
    authenticator = auth.Authenticator(keys)
    calls: list[tuple[bytes, bytes]] = []
    real = auth.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    for presented in ("key0", "key4", "nobody"):
        calls.clear()
        try:
            authenticator.identify(f"Bearer {presented}")
        except auth.Unauthorized:
            assert presented == "nobody"
        assert len(calls) == len(keys), presented


def test_the_data_directory_is_its_owners_alone(tmp_path: Path) -> None:
    """It holds every record and the endpoints' signing secrets: folders 0700, files 0600."""
    data = tmp_path / "new" / "data"
    with brook.open(str(data)) as b:
        b.topic("t").append(b"private")
        b.queue("t", "g")
        b.schedule("t", b"later", delay_ms=60_000)
        b.create_endpoint("e", "https://example.com/hook", topics=["t"], secret=SECRET)
    for path in [data, *data.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"


def test_a_key_limited_to_some_topics_sees_those_only(secured: Served) -> None:
    """The table's `visible` rule (server/adapter.py): listings leave out the topics
    beyond a key, and a topic beyond it named as an argument is a 403."""
    admin = {"authorization": f"Bearer {KEYS['admin'][0]}"}
    consumer = {"authorization": f"Bearer {KEYS['consumer'][0]}"}
    for name in ("events.seen", "hidden.one"):
        assert secured.request("PUT", f"/v1/topics/{name}", {}, admin)[0] == 200
    status, listed = secured.request("GET", "/v1/topics", None, consumer)
    names = {t["name"] for t in listed["topics"]}
    assert status == 200 and "events.seen" in names and "hidden.one" not in names
    status, everything = secured.request("GET", "/v1/topics", None, admin)
    assert {"events.seen", "hidden.one"} <= {t["name"] for t in everything["topics"]}
    status, answer = secured.request("GET", "/v1/lake?topic=hidden.one", None, consumer)
    assert status == 403 and answer["error"]["code"] == "forbidden"
    status, lake = secured.request("GET", "/v1/lake", None, consumer)
    assert status == 200 and all(t["topic"].startswith("events.") for t in lake["topics"])
