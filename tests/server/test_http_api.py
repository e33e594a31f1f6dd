"""The HTTP API of SPEC §4, black-box, over real HTTP against `brook serve`."""

from __future__ import annotations

import base64
import http.client
import re
import socket
import threading
import time
from pathlib import Path

from tests.served import Served


def records(*values: str) -> dict[str, list[dict[str, str]]]:
    return {"records": [{"value": v} for v in values]}


def test_health(served: Served) -> None:
    assert served.request("GET", "/v1/health") == (200, {"status": "ok"})


def test_topics_lifecycle(served: Served) -> None:
    status, info = served.request(
        "PUT", "/v1/topics/orders", {"partitions": 3, "retention_ms": 60000}
    )
    assert (
        status == 200
        and info["partitions"] == 3
        and info["end_offsets"] == {"0": 0, "1": 0, "2": 0}
    )
    assert (
        served.request("PUT", "/v1/topics/orders", {"partitions": 3, "retention_ms": 60000})[0]
        == 200
    )
    status, error = served.request("PUT", "/v1/topics/orders", {"partitions": 4})
    assert status == 409 and error["error"]["code"] == "conflict"
    status, listing = served.request("GET", "/v1/topics")
    assert [t["name"] for t in listing["topics"]] == ["orders"]
    status, one = served.request("GET", "/v1/topics/orders")
    assert status == 200 and one["start_offsets"] == {"0": 0, "1": 0, "2": 0}
    assert served.request("DELETE", "/v1/topics/orders") == (200, {"deleted": "orders"})
    assert served.request("GET", "/v1/topics/orders")[0] == 404
    assert served.request("DELETE", "/v1/topics/orders")[0] == 404


def test_topic_errors(served: Served) -> None:
    assert served.request("PUT", "/v1/topics/bad%20name", {})[1]["error"]["code"] == "invalid_name"
    assert served.request("PUT", "/v1/topics/__reserved", {})[0] == 400
    assert served.request("PUT", "/v1/topics/t", {"partitions": 0})[0] == 400
    assert served.request("PUT", "/v1/topics/t", {"colour": "blue"})[0] == 400
    assert served.request("PUT", "/v1/topics/t", [1, 2])[0] == 400
    assert (
        served.request("PUT", "/v1/topics/t", b"{not json", {"content-type": "application/json"})[0]
        == 400
    )


def test_append_and_read_json_records(served: Served) -> None:
    body = {
        "records": [
            {"value": "hello", "key": "k1", "headers": {"trace": "abc"}},
            {
                "value_b64": base64.b64encode(b"\x00\xff").decode(),
                "key_b64": base64.b64encode(b"\x01").decode(),
            },
        ]
    }
    status, acks = served.request("POST", "/v1/topics/events/records", body)
    assert status == 200 and [a["offset"] for a in acks["acks"]] == [0, 1]
    status, page = served.request("GET", "/v1/topics/events/records?partition=0&offset=0&limit=10")
    assert status == 200 and page["next_offset"] == 2
    first, second = page["records"]
    assert (first["value"], first["key"], first["headers"]) == ("hello", "k1", {"trace": "abc"})
    assert first["value_b64"] == base64.b64encode(b"hello").decode()
    assert "value" not in second and base64.b64decode(second["value_b64"]) == b"\x00\xff"
    assert base64.b64decode(second["key_b64"]) == b"\x01"
    status, page = served.request("GET", "/v1/topics/events/records?offset=1&limit=1")
    assert [r["offset"] for r in page["records"]] == [1]


def test_raw_body_appends_one_record(served: Served) -> None:
    status, acks = served.request(
        "POST",
        "/v1/topics/raw/records?key=user-1",
        b"\x00binary",
        {"content-type": "application/octet-stream"},
    )
    assert status == 200 and acks["acks"][0]["offset"] == 0
    record = served.request("GET", "/v1/topics/raw/records")[1]["records"][0]
    assert base64.b64decode(record["value_b64"]) == b"\x00binary" and record["key"] == "user-1"


def test_idempotent_appends_over_http(served: Served) -> None:
    body = {"records": [{"value": "charge", "idempotency_key": "order-9"}]}
    first = served.request("POST", "/v1/topics/pay/records", body)[1]["acks"][0]
    again = served.request("POST", "/v1/topics/pay/records", body)[1]["acks"][0]
    assert first == again
    raw = served.request("POST", "/v1/topics/pay/records", b"x", {"idempotency-key": "order-9"})[1][
        "acks"
    ][0]
    assert raw == first
    assert served.request("GET", "/v1/topics/pay")[1]["end_offsets"] == {"0": 1}


def test_read_errors_and_edges(served: Served) -> None:
    served.request("POST", "/v1/topics/t/records", records("a", "b"))
    assert (
        served.request("GET", "/v1/topics/missing/records")[1]["error"]["code"] == "topic_not_found"
    )
    assert served.request("GET", "/v1/topics/t/records?partition=1")[0] == 404
    for bad in ["offset=-1", "offset=abc", "limit=-2", "partition=x", "wait_ms=-5"]:
        assert served.request("GET", f"/v1/topics/t/records?{bad}")[0] == 400, bad
    status, page = served.request("GET", "/v1/topics/t/records?offset=99")
    assert status == 200 and page == {"records": [], "next_offset": 99}
    status, page = served.request("GET", "/v1/topics/t/records?limit=1000000")
    assert status == 200 and len(page["records"]) == 2, "a huge limit is capped, not refused"


def test_bad_records_are_refused_whole(served: Served) -> None:
    cases = [
        {"records": [{"value": "ok"}, {"key": "no value"}]},
        {"records": [{"value_b64": "not base64!"}]},
        {"records": [{"value": "a", "value_b64": "YQ=="}]},
        {"records": [{"value": 5}]},
        {"records": [{"value": "a", "surprise": 1}]},
        {"records": "nope"},
        {"no_records": []},
    ]
    for body in cases:
        status, error = served.request("POST", "/v1/topics/strict/records", body)
        assert status == 400 and error["error"]["message"], body
    assert served.request("GET", "/v1/topics/strict/records")[0] == 404, (
        "nothing was created or appended"
    )


def test_size_limits_answer_413(tmp_path: Path) -> None:
    server = Served(tmp_path / "d", "--request-bytes-max", "65536")
    try:
        status, error = server.request("POST", "/v1/topics/t/records", b"x" * 70_000)
        assert status == 413 and error["error"]["code"] == "record_too_large"
        status, _ = server.request("POST", "/v1/topics/t/records", b"x" * 60_000)
        assert status == 200
    finally:
        server.close()


def test_oversized_record_answers_413(served: Served) -> None:
    status, error = served.request("POST", "/v1/topics/t/records", b"x" * (8 * 1024 * 1024 + 1))
    assert status == 413 and error["error"]["code"] == "record_too_large"


def test_binary_batches_in_and_out(served: Served) -> None:
    from brook.codec import encode_batch
    from brook.codec.batch import Columns
    from brook.records import Record

    batch_type = {"content-type": "application/vnd.brook.batch"}
    records = [Record(b"v0", key=b"k", headers={"h": b"1"}), Record(b"v1")]
    body = b"".join(encode_batch(0, 0, Columns.from_records(records, [b"id-0", None])))
    status, acks = served.request("POST", "/v1/topics/bin/records", body, batch_type)
    assert status == 200 and [a["offset"] for a in acks["acks"]] == [0, 1]
    assert (
        served.request("POST", "/v1/topics/bin/records", body, batch_type)[1]["acks"][0]["offset"]
        == 0
    ), "idempotency keys travel in the batch"
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    connection.request(
        "GET", "/v1/topics/bin/records?offset=0", headers={"accept": "application/vnd.brook.batch"}
    )
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    assert response.getheader("content-type") == "application/vnd.brook.batch"
    assert response.getheader("brook-next-offset") == "3"
    assert raw.startswith(b"BTCH")
    damaged = bytearray(body)
    damaged[60] ^= 1
    for bad in (bytes(damaged), body[:-3], b"garbage"):
        status, error = served.request("POST", "/v1/topics/bin/records", bad, batch_type)
        assert status == 400 and "binary batch" in error["error"]["message"]
    assert served.request("GET", "/v1/topics/bin")[1]["end_offsets"] == {"0": 3}


def test_binary_batches_are_checked_like_any_append(served: Served) -> None:
    from brook.codec import encode_batch
    from brook.codec.batch import Columns
    from brook.partitioner import partition_for_key

    batch_type = {"content-type": "application/vnd.brook.batch"}
    first = b"".join(encode_batch(0, 0, Columns([b"a", b"b"], keys=[b"k", None])))
    second = b"".join(encode_batch(7, 0, Columns([b"c"])))
    status, acks = served.request("POST", "/v1/topics/two/records", first + second, batch_type)
    assert status == 200 and [a["offset"] for a in acks["acks"]] == [0, 1, 2]
    records = served.request("GET", "/v1/topics/two/records?offset=0")[1]["records"]
    assert [(r["value"], r.get("key")) for r in records] == [("a", "k"), ("b", None), ("c", None)]

    status, got = served.request("GET", "/v1/topics/two/records?offset=2")
    assert [r["value"] for r in got["records"]] == ["c"], "each batch of a request is indexed"

    served.request("PUT", "/v1/topics/keyed", b'{"partitions": 4}')
    keys = [b"k%d" % i for i in range(20)]
    body = b"".join(encode_batch(0, 0, Columns([b"v" + k for k in keys], keys=list(keys))))
    status, acks = served.request("POST", "/v1/topics/keyed/records", body, batch_type)
    assert status == 200 and len({a["partition"] for a in acks["acks"]}) > 1
    for key, ack in zip(keys, acks["acks"], strict=True):
        assert ack["partition"] == partition_for_key(key, 4), "keyed records follow their key"

    huge = b"".join(encode_batch(0, 0, Columns([b"ok", b"x" * (8 * 1024 * 1024 + 1)])))
    status, error = served.request("POST", "/v1/topics/two/records", huge, batch_type)
    assert status == 413 and error["error"]["code"] == "record_too_large"
    long_key = b"".join(encode_batch(0, 0, Columns([b"v"], idempotency=[b"i" * 257])))
    status, error = served.request("POST", "/v1/topics/two/records", long_key, batch_type)
    assert status == 400 and "idempotency_key" in error["error"]["message"]
    status, acks = served.request("POST", "/v1/topics/two/records", b"", batch_type)
    assert status == 200 and acks == {"acks": []}
    assert served.request("GET", "/v1/topics/two")[1]["end_offsets"] == {"0": 3}, (
        "nothing of a refused batch was appended"
    )


def test_unknown_paths_and_methods(served: Served) -> None:
    assert served.request("GET", "/v2/whatever")[1]["error"]["code"] == "not_found"
    status, error = served.request("PATCH", "/v1/topics")
    assert status == 405 and "GET" in error["error"]["message"]


def test_a_method_a_path_does_not_take_is_answered_405_with_allow(served: Served) -> None:
    """RFC 9110 §15.5.6: a 405 says in `Allow` which methods the path takes."""
    from brook.server.openapi import OPERATIONS

    taken: dict[str, set[str]] = {}
    for method, template in OPERATIONS:
        taken.setdefault(template, set()).add(method)
    for template, methods in taken.items():
        path = re.sub(r"\{(seq|chunk)\}", "1", template)
        path = re.sub(r"\{[a-z]+\}", "x", path)
        allowed = methods | ({"HEAD"} if "GET" in methods else set())
        wrong = next(m for m in ("PATCH", "PUT", "DELETE", "POST", "GET") if m not in methods)
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        try:
            connection.request(wrong, path, body=b"" if wrong != "GET" else None)
            response = connection.getresponse()
            response.read()
            assert response.status == 405, f"{wrong} {path}"
            assert set(response.getheader("allow", "").split(", ")) == allowed, f"{wrong} {path}"
        finally:
            connection.close()


def test_long_poll_returns_when_a_record_arrives(served: Served) -> None:
    served.request("PUT", "/v1/topics/t", {})
    result: list[object] = []

    def wait() -> None:
        started = time.monotonic()
        result.append(served.request("GET", "/v1/topics/t/records?offset=0&wait_ms=10000"))
        result.append(time.monotonic() - started)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)
    served.request("POST", "/v1/topics/t/records", records("late"))
    waiter.join(timeout=15)
    (status, page), took = result
    assert status == 200 and [r["value"] for r in page["records"]] == ["late"]  # type: ignore[index]
    assert took < 5, "the long-poll ended when the record arrived, not at its timeout"


def test_long_poll_times_out_empty(served: Served) -> None:
    served.request("PUT", "/v1/topics/t", {})
    started = time.monotonic()
    status, page = served.request("GET", "/v1/topics/t/records?offset=0&wait_ms=300")
    assert status == 200 and page["records"] == [] and time.monotonic() - started >= 0.25


def test_stream_group_poll_commit_and_positions(served: Served) -> None:
    served.request("POST", "/v1/topics/t/records", records(*[str(i) for i in range(6)]))
    first = served.request("GET", "/v1/topics/t/groups/g/poll?max_records=4")[1]["records"]
    second = served.request("GET", "/v1/topics/t/groups/g/poll?max_records=4")[1]["records"]
    assert [r["offset"] for r in first] == [0, 1, 2, 3] and [r["offset"] for r in second] == [4, 5]
    status, group = served.request("GET", "/v1/topics/t/groups/g")
    assert (
        group["positions"] == {"0": 6}
        and group["committed"] == {"0": 0}
        and group["lag"] == {"0": 6}
    )
    status, group = served.request("POST", "/v1/topics/t/groups/g/commit", {"offsets": {"0": 4}})
    assert status == 200 and group["committed"] == {"0": 4} and group["lag"] == {"0": 2}
    status, group = served.request("POST", "/v1/topics/t/groups/g/commit")
    assert group["committed"] == {"0": 6}
    assert served.request("POST", "/v1/topics/t/groups/g/commit", {"offsets": {"7": 1}})[0] == 404
    assert served.request("POST", "/v1/topics/t/groups/g/commit", {"offsets": {"0": -1}})[0] == 400
    assert served.request("POST", "/v1/topics/t/groups/g/commit", {"wrong": 1})[0] == 400
    assert served.request("GET", "/v1/topics/missing/groups/g/poll")[0] == 404
    assert served.request("GET", "/v1/topics/t/groups/g/poll?max_records=0")[0] == 400


def test_group_positions_survive_a_restart(tmp_path: Path) -> None:
    server = Served(tmp_path / "d", measured=True)
    server.request("POST", "/v1/topics/t/records", records("a", "b", "c"))
    server.request("GET", "/v1/topics/t/groups/g/poll?max_records=2")
    server.request("POST", "/v1/topics/t/groups/g/commit")
    assert server.stop() == 0
    again = Served(tmp_path / "d")
    try:
        rest = again.request("GET", "/v1/topics/t/groups/g/poll")[1]["records"]
        assert [r["value"] for r in rest] == ["c"]
    finally:
        again.close()


def test_pipelined_requests_are_answered_in_order(served: Served) -> None:
    served.request("POST", "/v1/topics/t/records", records("a"))
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        one = b"GET /v1/health HTTP/1.1\r\nhost: x\r\n\r\n"
        two = b"GET /v1/topics/t/records HTTP/1.1\r\nhost: x\r\n\r\n"
        three = b"GET /v1/topics/none/records HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        sock.sendall(one + two + three)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", data)
    assert statuses == [b"200", b"200", b"404"]
    assert (
        data.index(b'"status":"ok"') < data.index(b'"next_offset"') < data.index(b"topic_not_found")
    )


def test_malformed_http_gets_400_and_the_connection_closes(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 400") and b"bad_request" in data


def test_sigterm_answers_requests_in_flight_then_exits_0(tmp_path: Path) -> None:
    server = Served(tmp_path / "d", measured=True)
    server.request("PUT", "/v1/topics/t", {})
    result: list[object] = []
    waiter = threading.Thread(
        target=lambda: result.append(
            server.request("GET", "/v1/topics/t/records?offset=0&wait_ms=20000")
        )
    )
    waiter.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert server.stop() == 0
    waiter.join(timeout=10)
    assert result and result[0][0] == 200, "the long-poll in flight was answered"  # type: ignore[index]
    assert time.monotonic() - started < 10


def test_serving_beyond_loopback_needs_keys_or_insecure(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from brook.cli import main

    result = CliRunner().invoke(main, ["serve", "--data", str(tmp_path), "--host", "0.0.0.0"])
    assert result.exit_code == 1 and "--insecure" in result.output


def test_metrics_count_what_happened(served: Served) -> None:
    served.request("POST", "/v1/topics/m/records", records("a", "b", "c"))
    served.request("GET", "/v1/topics/m/groups/billing/poll?max_records=1")
    served.request("GET", "/v1/topics/nope/records")
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    connection.request("GET", "/metrics")
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    assert response.status == 200 and response.getheader("content-type", "").startswith(
        "text/plain"
    )
    metrics = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert metrics["brook_records_appended_total"] == 3
    assert metrics["brook_bytes_appended_total"] == 3
    assert metrics["brook_batches_total"] == 1 and metrics["brook_fsyncs_total"] >= 1
    assert metrics['brook_batch_seconds_bucket{le="+Inf"}'] == 1
    assert (
        metrics[
            'brook_http_requests_total{method="POST",route="/v1/topics/{topic}/records",status="200"}'
        ]
        == 1
    )
    assert (
        metrics[
            'brook_http_requests_total{method="GET",route="/v1/topics/{topic}/records",status="404"}'
        ]
        == 1
    )
    assert metrics['brook_group_lag{group="billing",partition="0",topic="m"}'] == 3
