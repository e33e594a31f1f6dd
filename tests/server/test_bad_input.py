"""Bad input at the HTTP edge gets a clear 4xx and changes nothing (issue 17).

Each test here failed before its fix. Against a real `brook serve`."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brook.config import hash_key
from tests.served import Served
from tests.waiting import slow

RECORD = {"records": [{"value": "x"}]}
JSON = {"content-type": "application/json"}

# Every route that takes a JSON body, with a path on which it is valid.
JSON_ROUTES = [
    ("PUT", "/v1/topics/t"),
    ("POST", "/v1/topics/t/records"),
    ("POST", "/v1/topics/t/groups/g/commit"),
    ("POST", "/v1/topics/t/groups/g/seek"),
    ("PUT", "/v1/topics/t/queues/q"),
    ("POST", "/v1/topics/t/queues/q/lease"),
    ("POST", "/v1/topics/t/queues/q/ack"),
    ("POST", "/v1/topics/t/queues/q/nack"),
    ("POST", "/v1/topics/t/queues/q/release"),
    ("POST", "/v1/topics/t/queues/q/extend"),
    ("POST", "/v1/topics/t/queues/q/discard"),
    ("POST", "/v1/topics/t/queues/q/redrive"),
    ("POST", "/v1/timers"),
    ("PUT", "/v1/topics/t/staged/w/1/p/0"),
    ("POST", "/v1/topics/t/staged/w/1/publish"),
]


def error_code(answer: object) -> str:
    assert isinstance(answer, dict), answer
    code: str = answer["error"]["code"]
    return code


def topics(served: Served) -> list[str]:
    _, answer = served.request("GET", "/v1/topics")
    return [t["name"] for t in answer["topics"]]


@pytest.fixture
def with_queue(served: Served) -> Iterator[Served]:
    """Topic t with one record and queue group q."""
    assert served.request("POST", "/v1/topics/t/records", RECORD)[0] == 200
    assert served.request("PUT", "/v1/topics/t/queues/q", {})[0] == 200
    yield served


def test_bodies_that_are_not_utf8_or_nest_too_deep_are_400_on_every_json_route(
    with_queue: Served,
) -> None:
    served = with_queue
    for method, path in JSON_ROUTES:
        for body in (b'{"records":[{"value":"\xff\xfe"}]}', b"[" * 100_000, b'{"a":' * 50_000):
            status, answer = served.request(method, path, body, JSON)
            assert status == 400, (method, path, status, answer)
            assert error_code(answer) == "bad_request"
    assert not any("Traceback" in line for line in served.log), "".join(served.log)
    assert served.request("GET", "/v1/topics/t")[1]["end_offsets"] == {"0": 1}


def test_a_repeated_field_anywhere_in_a_body_is_400(served: Served) -> None:
    for body in (
        b'{"records":[{"value":"a","value":"b"}]}',
        b'{"records":[{"value":"a","headers":{"h":"1","h":"2"}}]}',
        b'{"records":[],"records":[{"value":"a"}]}',
    ):
        status, answer = served.request("POST", "/v1/topics/t/records", body, JSON)
        assert status == 400 and "same field twice" in answer["error"]["message"]
    assert topics(served) == []


def test_unknown_fields_and_both_forms_of_a_field_are_400(served: Served) -> None:
    for body in (
        {"records": [{"value": "a"}], "extra": 1},
        {"records": [{"value": "a", "valu": "b"}]},
        {"records": [{"value": "a", "headers": {"h": "x"}, "headers_b64": {"h": "eA=="}}]},
        {"records": [{"value": "a", "value_b64": "eA=="}]},
    ):
        status, answer = served.request("POST", "/v1/topics/t/records", body)
        assert status == 400, (body, answer)
    assert topics(served) == []


def test_one_record_posted_bare_is_shown_the_body_s_shape(served: Served) -> None:
    for body in ({"value": "x"}, {}, [{"value": "x"}]):
        status, answer = served.request("POST", "/v1/topics/t/records", body)
        message = answer["error"]["message"]
        assert status == 400 and '{"records": [{"value": "..."}' in message, message
    status, answer = served.request("POST", "/v1/topics/t/records", {"records": [{"valu": "x"}]})
    assert status == 400 and '"records": [' not in answer["error"]["message"], "a field's own"
    assert topics(served) == []


def test_query_parameters_are_read_strictly(with_queue: Served) -> None:
    served = with_queue
    for query, words in (
        ("offset=", "offset must be a whole number, not empty"),
        ("offset=18446744073709551616", "at most"),
        ("offset=%2B5", "whole number"),
        ("offset=-1", "at least 0"),
        ("ofset=5", "unknown query parameter 'ofset'"),
        ("limit=0", "limit must be at least 1"),
        ("offset=0&limit=5&offset=3", "'offset' is given more than once"),
    ):
        status, answer = served.request("GET", f"/v1/topics/t/records?{query}")
        assert status == 400 and words in answer["error"]["message"], (query, answer)
    status, answer = served.request("GET", "/v1/topics/t/groups/g/poll?max_records=0")
    assert status == 400 and "max_records must be at least 1" in answer["error"]["message"]
    status, answer = served.request("GET", "/v1/topics/t/queues/q?verbose=1")
    assert status == 400 and "it takes none" in answer["error"]["message"]
    status, answer = served.request("GET", "/v1/topics/t/queues/q/trace?partition=0&offset=")
    assert status == 400


def test_seek_and_commit_past_the_end_are_400_and_move_nothing(with_queue: Served) -> None:
    served = with_queue
    path = "/v1/topics/t/groups/g"
    before = served.request("GET", path)[1]
    status, answer = served.request("POST", path + "/seek", {"partition": 0, "offset": 2})
    assert status == 400 and "past the end" in answer["error"]["message"]
    status, _ = served.request("POST", path + "/commit", {"offsets": {"0": 5}})
    assert status == 400
    assert served.request("GET", path)[1] == before
    # The end itself is a valid position: nothing left to read.
    assert served.request("POST", path + "/seek", {"partition": 0, "offset": 1})[0] == 200


def test_reads_never_create_topics_or_groups(with_queue: Served) -> None:
    served = with_queue
    status, answer = served.request("GET", "/v1/topics/typo/queues/q")
    assert (status, error_code(answer)) == (404, "topic_not_found")
    status, answer = served.request("GET", "/v1/topics/t/queues/typo")
    assert (status, error_code(answer)) == (404, "group_not_found")
    status, answer = served.request("GET", "/v1/topics/t/queues/typo/trace?partition=0&offset=0")
    assert status == 404
    status, answer = served.request("POST", "/v1/topics/typo/queues/q/lease", {})
    assert (status, error_code(answer)) == (404, "topic_not_found")
    assert topics(served) == ["t"]
    # Still no group typo, and PUT ?create=false changes only a group that exists.
    assert served.request("GET", "/v1/topics/t/queues/typo")[0] == 404
    status, _ = served.request("PUT", "/v1/topics/t/queues/typo?create=false", {"max_attempts": 3})
    assert status == 404
    assert served.request("GET", "/v1/topics/t/queues/typo")[0] == 404


def test_a_garbage_receipt_is_400_and_a_stale_one_409(with_queue: Served) -> None:
    served = with_queue
    status, answer = served.request("POST", "/v1/topics/t/queues/q/ack", {"receipts": ["nope"]})
    assert status == 400, answer
    stale = "0.0.1.99.0000abcd"
    status, answer = served.request("POST", "/v1/topics/t/queues/q/ack", {"receipts": [stale]})
    assert (status, error_code(answer)) == (409, "lease_expired")


def test_a_body_must_say_what_it_is(served: Served) -> None:
    # curl -d sends application/x-www-form-urlencoded: not stored as a raw record.
    form = {"content-type": "application/x-www-form-urlencoded"}
    status, answer = served.request("POST", "/v1/topics/t/records", b'{"records":[]}', form)
    assert (status, error_code(answer)) == (415, "unsupported_media_type")
    status, answer = served.request("POST", "/v1/topics/t/records", b"raw", {"content-type": None})
    assert status == 415
    assert topics(served) == []
    raw = {"content-type": "application/octet-stream"}
    assert served.request("POST", "/v1/topics/t/records?key=k", b"\x00raw", raw)[0] == 200
    _, page = served.request("GET", "/v1/topics/t/records")
    assert page["records"][0]["value_b64"] == "AHJhdw==" and page["records"][0]["key"] == "k"


def test_head_answers_like_get_without_a_body(served: Served) -> None:
    connection = socket.create_connection(("127.0.0.1", served.port), timeout=10)
    with connection:
        connection.sendall(
            b"HEAD /v1/health HTTP/1.1\r\nhost: x\r\n\r\nGET /v1/health HTTP/1.1\r\n\r\n"
        )
        answer = read_until(connection, b'{"status":"ok"}')
    head, _, rest = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"content-length: 15" in head
    assert rest.startswith(b"HTTP/1.1 200"), "HEAD's answer carried a body"


def read_until(connection: socket.socket, end: bytes, seconds: float = 10) -> bytes:
    data = b""
    deadline = time.monotonic() + slow(seconds)
    while not data.endswith(end) and time.monotonic() < deadline:
        chunk = connection.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_timers_refuse_seconds_as_ms_and_a_reused_id(served: Served) -> None:
    status, answer = served.request(
        "POST", "/v1/timers", {"topic": "t", "value": "v", "at": 1800000000}
    )
    assert status == 400 and "give at=1800000000000" in answer["error"]["message"]
    timer = {"topic": "t", "value": "v", "delay_ms": 60_000, "timer_id": "x"}
    assert served.request("POST", "/v1/timers", timer)[0] == 200
    assert served.request("POST", "/v1/timers", timer)[0] == 200  # a retry
    status, answer = served.request("POST", "/v1/timers", {**timer, "value": "w"})
    assert (status, error_code(answer)) == (409, "conflict")


# ---------------------------------------------------------------- slow and idle clients


def opened(served: Served) -> socket.socket:
    return socket.create_connection(("127.0.0.1", served.port), timeout=10)


def closed_within(connection: socket.socket, seconds: float) -> bytes:
    """What the server sent before closing the connection, which must happen in time."""
    connection.settimeout(seconds)
    data = b""
    while True:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[Served]:
    server = Served(
        tmp_path / "data",
        "--header-timeout-s",
        "1",
        "--body-timeout-s",
        "1",
        "--idle-timeout-s",
        "2",
        "--connections-max",
        "4",
    )
    yield server
    server.close()


def test_half_sent_headers_get_408_and_a_close(strict: Served) -> None:
    with opened(strict) as connection:
        connection.sendall(b"GET /v1/health HTTP/1.1\r\nhost: x\r\n")
        started = time.monotonic()
        answer = closed_within(connection, 5)
    assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer
    assert time.monotonic() - started < 4
    _, metrics = strict.request("GET", "/metrics")
    assert "brook_http_requests_timed_out_total 1.0" in metrics


def test_a_body_that_stops_coming_gets_408(strict: Served) -> None:
    with opened(strict) as connection:
        connection.sendall(
            b"POST /v1/topics/t/records HTTP/1.1\r\ncontent-type: application/json\r\n"
            b"content-length: 100\r\n\r\n{"
        )
        assert closed_within(connection, 5).startswith(b"HTTP/1.1 408")
    assert strict.request("GET", "/v1/topics")[1]["topics"] == []


def test_an_idle_connection_is_closed(strict: Served) -> None:
    with opened(strict) as connection:
        connection.sendall(b"GET /v1/health HTTP/1.1\r\n\r\n")
        first = read_until(connection, b'{"status":"ok"}')
        assert first.startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert closed_within(connection, 6) == b""
        assert 1 < time.monotonic() - started < 5


def test_a_declared_length_too_large_gets_413_at_once(served: Served) -> None:
    with opened(served) as connection:
        connection.sendall(
            b"POST /v1/topics/t/records HTTP/1.1\r\ncontent-type: application/json\r\n"
            b"content-length: 1073741824\r\n\r\nabc"
        )
        connection.settimeout(5)
        answer = connection.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413")


def test_connections_past_the_cap_get_503_and_the_others_are_served(strict: Served) -> None:
    held = [opened(strict) for _ in range(4)]
    try:
        time.sleep(0.2)
        with opened(strict) as extra:
            extra.sendall(b"GET /v1/health HTTP/1.1\r\n\r\n")
            answer = closed_within(extra, 5)
        assert answer.startswith(b"HTTP/1.1 503") and b"connections_max" in answer
        held[0].sendall(b"GET /v1/health HTTP/1.1\r\n\r\n")
        assert read_until(held[0], b'{"status":"ok"}').startswith(b"HTTP/1.1 200")
    finally:
        for connection in held:
            connection.close()
    time.sleep(0.2)
    _, metrics = strict.request("GET", "/metrics")
    assert "brook_http_connections_refused_total 1.0" in metrics


# ---------------------------------------------------------------- with API keys

KEY = "key-consumer-only"
ADMIN = "key-admin"


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[Served]:
    config = tmp_path / "brook.toml"
    config.write_text(
        f'[[auth.keys]]\nname = "c"\nsha256 = "{hash_key(KEY)}"\nscopes = ["consume"]\n\n'
        f'[[auth.keys]]\nname = "a"\nsha256 = "{hash_key(ADMIN)}"\nscopes = ["admin"]\n'
    )
    server = Served(tmp_path / "data", config=config)
    yield server
    server.close()


def test_every_route_but_health_needs_a_key(keyed: Served) -> None:
    assert keyed.request("HEAD", "/v1/health")[0] == 200
    assert keyed.request("GET", "/v1/health")[0] == 200
    assert keyed.request("GET", "/openapi.json")[0] == 401
    assert keyed.request("GET", "/no/such/route")[0] == 401
    auth = {"authorization": f"Bearer {KEY}"}
    assert keyed.request("GET", "/openapi.json", headers=auth)[0] == 200
    assert keyed.request("GET", "/no/such/route", headers=auth)[0] == 404


def test_a_consume_key_cannot_create_topics_through_a_queue_group(keyed: Served) -> None:
    auth = {"authorization": f"Bearer {KEY}"}
    status, answer = keyed.request("PUT", "/v1/topics/new/queues/q", {}, headers=auth)
    assert (status, error_code(answer)) == (404, "topic_not_found")
    status, answer = keyed.request("GET", "/v1/topics/new/queues/q", headers=auth)
    assert status == 404
    admin = {"authorization": f"Bearer {ADMIN}"}
    assert keyed.request("GET", "/v1/topics", headers=admin)[1]["topics"] == []
