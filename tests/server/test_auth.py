"""API keys, scopes and topic patterns; TLS; the config file. Against `brook serve`."""

from __future__ import annotations

import ssl
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import brook
from brook.cli import main
from brook.config import hash_key
from brook.errors import Unauthorized
from tests.served import Served
from tests.server.test_http_framing import exchange

KEYS = {"admin": "key-admin-1", "producer": "key-producer-1", "consumer": "key-consumer-1"}
CONFIG = f"""
[[auth.keys]]
name = "admin"
sha256 = "{hash_key(KEYS["admin"])}"
scopes = ["admin"]

[[auth.keys]]
name = "producer"
sha256 = "{hash_key(KEYS["producer"])}"
scopes = ["produce"]
topics = ["events.*"]

[[auth.keys]]
name = "consumer"
sha256 = "{hash_key(KEYS["consumer"])}"
scopes = ["consume"]
topics = ["events.*"]
"""

RECORDS = {"records": [{"value": "x"}]}
TIMER = {"topic": "events.a", "value": "x", "delay_ms": 60_000, "timer_id": "tm1"}
# (method, path, body, the key that may, a key that may not) in an order that works end to end.
ROUTES = [
    ("PUT", "/v1/topics/events.a", {}, "admin", "producer"),
    ("GET", "/v1/topics", None, "consumer", None),
    ("GET", "/v1/topics/events.a", None, "producer", None),
    ("POST", "/v1/topics/events.a/records", RECORDS, "producer", "consumer"),
    ("GET", "/v1/topics/events.a/records", None, "consumer", "producer"),
    ("GET", "/v1/topics/events.a/groups/g/poll", None, "consumer", "producer"),
    ("POST", "/v1/topics/events.a/groups/g/commit", None, "consumer", "producer"),
    ("GET", "/v1/topics/events.a/groups/g", None, "consumer", "admin"),
    ("PUT", "/v1/topics/events.a/queues/q", {}, "consumer", "producer"),
    ("POST", "/v1/topics/events.a/queues/q/lease", {}, "consumer", "producer"),
    ("GET", "/v1/topics/events.a/queues/q", None, "consumer", "admin"),
    ("POST", "/v1/timers", TIMER, "producer", "consumer"),
    ("GET", "/v1/timers/tm1", None, "producer", "consumer"),
    ("DELETE", "/v1/timers/tm1", None, "producer", "consumer"),
    ("GET", "/metrics", None, "admin", "consumer"),
    ("DELETE", "/v1/topics/events.a", None, "admin", "consumer"),
]


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Served]:
    config = tmp_path / "brook.toml"
    config.write_text(CONFIG)
    server = Served(tmp_path / "data", config=config)
    yield server
    server.close()


def bearer(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[name]}"}


def test_every_route_against_every_kind_of_caller(secured: Served) -> None:
    for method, path, body, allowed, refused in ROUTES:
        status, error = secured.request(method, path, body)
        assert status == 401 and error["error"]["code"] == "unauthorized", (method, path)
        status, _ = secured.request(method, path, body, {"authorization": "Bearer not-a-key"})
        assert status == 401, (method, path)
        status, _ = secured.request(method, path, body, {"authorization": "Basic abc"})
        assert status == 401, (method, path)
        if refused is not None:
            status, error = secured.request(method, path, body, bearer(refused))
            assert status == 403 and error["error"]["code"] == "forbidden", (method, path, refused)
        status, _ = secured.request(method, path, body, bearer(allowed))
        assert status == 200, (method, path, allowed)


def test_topic_patterns_limit_keys(secured: Served) -> None:
    assert secured.request("PUT", "/v1/topics/other", {}, bearer("admin"))[0] == 200
    status, error = secured.request("POST", "/v1/topics/other/records", RECORDS, bearer("producer"))
    assert status == 403 and "other" in error["error"]["message"]
    assert secured.request("GET", "/v1/topics/other", None, bearer("consumer"))[0] == 403
    secured.request("POST", "/v1/topics/events.b/records", RECORDS, bearer("producer"))
    names = [
        t["name"]
        for t in secured.request("GET", "/v1/topics", None, bearer("consumer"))[1]["topics"]
    ]
    assert names == ["events.b"], "a key sees only the topics it may use"
    timer = {"topic": "other", "value": "x", "timer_id": "tm2", "delay_ms": 60_000}
    status, error = secured.request("POST", "/v1/timers", timer, bearer("producer"))
    assert status == 403 and "other" in error["error"]["message"]


def test_health_is_open_and_401_says_how_to_authenticate(secured: Served) -> None:
    assert secured.request("GET", "/v1/health")[0] == 200
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", secured.port, timeout=10)
    connection.request("GET", "/v1/topics")
    response = connection.getresponse()
    response.read()
    connection.close()
    assert response.status == 401 and response.getheader("www-authenticate", "").startswith(
        "Bearer"
    )


def test_keys_create_prints_the_key_once_and_only_its_hash_for_the_config() -> None:
    result = CliRunner().invoke(
        main, ["keys", "create", "--name", "ingest", "--scopes", "produce", "--topics", "events.*"]
    )
    assert result.exit_code == 0
    key = result.stderr.split("store it now): ")[1].split()[0]
    stanza = tomllib.loads(result.stdout)["auth"]["keys"][0]
    assert stanza == {
        "name": "ingest",
        "sha256": hash_key(key),
        "scopes": ["produce"],
        "topics": ["events.*"],
    }
    assert key not in result.stdout
    bad = CliRunner().invoke(main, ["keys", "create", "--name", "x", "--scopes", "root"])
    assert bad.exit_code == 1 and "scopes" in bad.output


def test_a_tenant_s_key_is_never_made_for_every_topic_unasked() -> None:
    """Every topic would let the tenant's endpoints take every tenant's records."""
    create = ["keys", "create", "--name", "c42", "--scopes", "admin", "--tenant", "c42"]
    unasked = CliRunner().invoke(main, create)
    assert unasked.exit_code == 1 and "needs --topics" in unasked.output
    assert "store it now" not in unasked.output, "no key made"
    made = CliRunner().invoke(main, [*create, "--topics", "events.c42.*"])
    stanza = tomllib.loads(made.stdout)["auth"]["keys"][0]
    assert (stanza["topics"], stanza["tenant"]) == (["events.c42.*"], "c42")
    for every in ("*", "?*", "events.*,**"):
        chosen = CliRunner().invoke(main, [*create, "--topics", every])
        assert chosen.exit_code == 0 and "covers every topic" in chosen.stderr, every
    assert "covers" not in CliRunner().invoke(main, [*create, "--topics", "??*"]).stderr
    empty = CliRunner().invoke(main, [*create, "--topics", " , "])
    assert empty.exit_code == 1 and "names no pattern" in empty.output
    plain = CliRunner().invoke(main, ["keys", "create", "--name", "ops", "--scopes", "admin"])
    assert tomllib.loads(plain.stdout)["auth"]["keys"][0]["topics"] == ["*"]


def test_a_bad_config_file_is_one_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "brook.toml"
    for text, expected in [
        ("port = ", "not valid TOML"),
        ('[[auth.keys]]\nname = "a"\nsha256 = "zz"\nscopes = ["admin"]\n', "sha256"),
        ('[[auth.keys]]\nname = "a"\nsha256 = "' + "0" * 64 + '"\nscopes = ["root"]\n', "scopes"),
        (
            '[[auth.keys]]\nname = "c42"\nsha256 = "' + "0" * 64 + '"\nscopes = ["admin"]\n'
            'tenant = "c42"\n',
            "needs its topics",
        ),
    ]:
        config.write_text(text)
        result = CliRunner().invoke(
            main, ["--config", str(config), "topics", "list", "--data", str(tmp_path / "d")]
        )
        assert (
            result.exit_code == 1 and expected in result.output and "Traceback" not in result.output
        )
    missing = CliRunner().invoke(main, ["--config", str(tmp_path / "nope.toml"), "topics", "list"])
    assert missing.exit_code == 1 and "cannot read" in missing.output


def test_options_come_from_the_config_file_and_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "brook.toml"
    config.write_text("request_bytes_max = 2048\n")
    server = Served(tmp_path / "data", config=config)
    try:
        assert server.request("POST", "/v1/topics/t/records", b"x" * 3000)[0] == 413
        assert server.request("POST", "/v1/topics/t/records", b"x" * 1000)[0] == 200
    finally:
        server.close()
    server = Served(tmp_path / "data", config=config, env={"BROOK_REQUEST_BYTES_MAX": "4096"})
    try:
        assert server.request("POST", "/v1/topics/t/records", b"x" * 3000)[0] == 200, (
            "the environment wins"
        )
    finally:
        server.close()


def test_brook_serve_takes_its_config_file_after_the_command_too(tmp_path: Path) -> None:
    """SPEC §5: `brook serve ... --config FILE` (as `brook --config FILE serve`)."""
    config = tmp_path / "elsewhere.toml"
    config.write_text("request_bytes_max = 2048\n")
    server = Served(tmp_path / "data", "--config", str(config))
    try:
        assert server.request("POST", "/v1/topics/t/records", b"x" * 3000)[0] == 413
    finally:
        server.close()
    config.write_text("port = 'eighty'\n")
    bad = CliRunner().invoke(main, ["serve", "--config", str(config)])
    assert bad.exit_code == 1 and "elsewhere.toml" in bad.output and "port" in bad.output


def test_https_with_a_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    trust = ssl.create_default_context(cafile=str(cert))
    server = Served(tmp_path / "data", "--tls-cert", str(cert), "--tls-key", str(key), tls=trust)
    try:
        assert any("https://" in line for line in server.log)
        assert server.request("GET", "/v1/health") == (200, {"status": "ok"})
        assert server.request("POST", "/v1/topics/t/records", RECORDS)[0] == 200
    finally:
        server.close()
    half = CliRunner().invoke(
        main, ["serve", "--data", str(tmp_path / "d"), "--tls-cert", str(cert)]
    )
    assert half.exit_code == 1 and "--tls-key" in half.output


def test_a_key_without_the_bearer_scheme_is_told_so_and_never_echoed(secured: Served) -> None:
    key = KEYS["admin"]
    for header, told in (
        (key, "no scheme"),
        (f"Token {key}", "the 'Token' scheme"),
        (f"Basic {key}", "the 'Basic' scheme"),
    ):
        status, error = secured.request("GET", "/v1/topics", None, {"authorization": header})
        message = error["error"]["message"]
        assert status == 401 and told in message and "Bearer <key>" in message, message
        assert key not in message


def test_two_keys_in_one_request_are_refused_whatever_their_order(secured: Served) -> None:
    """Which of two Authorization headers counts is ambiguous (a proxy may read one, the
    server the other): neither does, in either order."""
    admin, weak = f"Bearer {KEYS['admin']}", "Bearer not-a-key"
    for first, second in ((admin, weak), (weak, admin)):
        head = (
            f"GET /v1/topics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {first}\r\n"
            f"Authorization: {second}\r\nConnection: close\r\n\r\n"
        )
        answer = exchange(secured, head.encode())
        assert answer.startswith(b"HTTP/1.1 400") and b"more than one authorization" in answer


def test_a_key_a_header_cannot_carry_is_refused_by_the_client_in_one_line(
    secured: Served,
) -> None:
    for bad in ("cl\u00e9", "a\nb", "two words"):
        with pytest.raises(Unauthorized, match="is not one"):
            brook.connect(f"http://127.0.0.1:{secured.port}", api_key=bad)
        result = CliRunner().invoke(
            main, ["topics", "list", "--url", f"http://127.0.0.1:{secured.port}", "--api-key", bad]
        )
        assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
        assert bad not in result.output
