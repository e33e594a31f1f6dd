"""The queue endpoints of SPEC §4, black-box over real HTTP, and the async client."""

from __future__ import annotations

import asyncio

import pytest

import brook
from brook.errors import LeaseExpired
from tests.served import Served


def base(topic: str = "jobs", group: str = "workers") -> str:
    return f"/v1/topics/{topic}/queues/{group}"


def test_queue_lifecycle_over_http(served: Served) -> None:
    served.request("POST", "/v1/topics/jobs/records", {"records": [{"value": "a"}, {"value": "b"}]})
    status, described = served.request("PUT", base(), {"max_attempts": 2, "ordering": "key"})
    assert status == 200
    assert described["settings"]["max_attempts"] == 2
    assert described["settings"]["dead_letter_topic"] == "jobs.dlq"
    assert described["stats"]["ready"] == 2
    status, leased = served.request("POST", base() + "/lease", {"max_records": 5})
    assert status == 200
    jobs = leased["jobs"]
    assert [(j["value"], j["attempt"], j["offset"]) for j in jobs] == [("a", 1, 0), ("b", 1, 1)]
    receipts = [j["receipt"] for j in jobs]
    assert served.request("POST", base() + "/ack", {"receipts": receipts[:1]}) == (
        200,
        {"settled": 1},
    )
    status, error = served.request("POST", base() + "/ack", {"receipts": receipts[:1]})
    assert status == 409 and error["error"]["code"] == "lease_expired"
    assert (
        served.request("POST", base() + "/extend", {"receipts": receipts[1:], "ms": 5000})[0] == 200
    )
    assert (
        served.request("POST", base() + "/discard", {"receipts": receipts[1:], "reason": "no"})[0]
        == 200
    )
    status, described = served.request("GET", base())
    assert {k: described["stats"][k] for k in ("acked", "dead")} == {"acked": 1, "dead": 1}
    status, trace = served.request("GET", base() + "/trace?partition=0&offset=1")
    assert [t["state"] for t in trace["transitions"]] == ["leased", "leased", "dead"]
    assert trace["transitions"][2]["reason"] == "no"
    assert served.request("POST", base() + "/redrive", {}) == (200, {"redriven": 1})
    assert served.request("POST", base() + "/redrive") == (200, {"redriven": 0})
    status, leased = served.request("POST", base() + "/lease", {"max_records": 5, "wait_ms": 100})
    assert [j["value"] for j in leased["jobs"]] == ["b"]
    receipt = leased["jobs"][0]["receipt"]
    assert (
        served.request("POST", base() + "/nack", {"receipts": [receipt], "delay_ms": 0})[0] == 200
    )


def test_a_lease_long_polls_until_a_record_arrives(served: Served) -> None:
    served.request("PUT", base(), {})
    import threading

    later = threading.Timer(
        0.3,
        lambda: served.request("POST", "/v1/topics/jobs/records", {"records": [{"value": "x"}]}),
    )
    later.start()
    try:
        status, leased = served.request("POST", base() + "/lease", {"wait_ms": 5000})
    finally:
        later.join()
    assert status == 200 and [j["value"] for j in leased["jobs"]] == ["x"]


@pytest.mark.parametrize(
    ("method", "path", "body", "code"),
    [
        ("PUT", base(), {"max_attempts": 0}, "bad_request"),
        ("PUT", base(), {"colour": "blue"}, "bad_request"),
        ("PUT", base(), [1], "bad_request"),
        ("PUT", base(group="bad%20name"), {}, "invalid_name"),
        ("POST", base() + "/lease", {"max_records": 0}, "bad_request"),
        ("POST", base() + "/lease", {"wait_ms": -1}, "bad_request"),
        ("POST", base() + "/ack", {}, "bad_request"),
        ("POST", base() + "/ack", {"receipts": "r"}, "bad_request"),
        ("POST", base() + "/ack", {"receipts": [1]}, "bad_request"),
        ("POST", base() + "/extend", {"receipts": ["0.0.1.1.a"]}, "bad_request"),
        ("POST", base() + "/nack", {"receipts": ["0.0.1.1.a"], "delay_ms": -5}, "bad_request"),
        ("POST", base() + "/release", {"receipts": ["0.0.1.1.a"], "delay_ms": -5}, "bad_request"),
        ("POST", base() + "/release", {"receipts": ["0.0.1.1.0000000a"]}, "lease_expired"),
        ("POST", base() + "/ack", {"receipts": ["0.0.1.1.0000000a"]}, "lease_expired"),
        ("POST", base() + "/ack", {"receipts": ["0.0.1.1.a"]}, "bad_request"),
        ("GET", base() + "/trace?partition=x&offset=0", None, "bad_request"),
        ("POST", base() + "/redrive", {"limit": 0}, "bad_request"),
        ("POST", base() + "/redrive", {"records": [{"partition": 0}]}, "bad_request"),
        ("POST", base() + "/redrive", {"records": {"partition": 0, "offset": 1}}, "bad_request"),
    ],
)
def test_bad_queue_requests_get_clear_errors(
    served: Served, method: str, path: str, body: object, code: str
) -> None:
    served.request("PUT", base(), {})
    status, error = served.request(method, path, body)
    assert 400 <= status < 500 and error["error"]["code"] == code, (status, error)


def test_the_queue_endpoints_are_in_the_openapi_document(served: Served) -> None:
    _, document = served.request("GET", "/openapi.json")
    paths = document["paths"]
    suffixes = ("", "/lease", "/ack", "/nack", "/release", "/extend", "/discard", "/trace")
    for suffix in (*suffixes, "/redrive"):
        assert "/v1/topics/{topic}/queues/{group}" + suffix in paths


def test_the_async_client_leases_and_settles(served: Served) -> None:
    async def work() -> None:
        async with brook.connect_async(f"http://127.0.0.1:{served.port}") as b:
            await b.topic("jobs").append_many([brook.Record(b"a"), brook.Record(b"b")])
            q = await b.queue("jobs", "workers", max_attempts=3)
            assert (await q.settings())["max_attempts"] == 3
            jobs = await q.lease(max_records=5)
            assert [j.record.value for j in jobs] == [b"a", b"b"]
            await q.ack(jobs[0])
            with pytest.raises(LeaseExpired):
                await q.ack(jobs[0])
            await q.extend(jobs[1], 1000)
            await q.discard(jobs[1], reason="bad")
            stats = await q.stats()
            assert (stats["acked"], stats["dead"]) == (1, 1)
            assert [t.state.value for t in await q.trace(0, 1)] == ["leased", "leased", "dead"]
            assert await q.redrive() == 1
            (again,) = await q.lease(max_records=5, timeout=1.0)
            await q.release(again, delay_ms=60_000, reason="not mine")
            assert (await q.stats())["retrying"] == 1
            assert [t.attempt for t in await q.trace(0, 1)][-1] == 0, "no attempt spent"

    asyncio.run(work())


def test_metrics_show_each_queue_group_by_state(served: Served) -> None:
    served.request("POST", "/v1/topics/jobs/records", {"records": [{"value": "a"}, {"value": "b"}]})
    served.request("PUT", base(), {})
    served.request("POST", base() + "/lease", {"max_records": 1})
    status, text = served.request("GET", "/metrics")
    assert status == 200
    lines = set(text.splitlines())
    assert 'brook_queue_records{group="workers",state="leased",topic="jobs"} 1.0' in lines
    assert 'brook_queue_records{group="workers",state="ready",topic="jobs"} 1.0' in lines
    assert any(
        line.startswith('brook_queue_oldest_ready_age_seconds{group="workers",topic="jobs"}')
        for line in lines
    )
