"""The timer endpoints of SPEC §4, black-box over real HTTP."""

from __future__ import annotations

import time

import pytest

from tests.served import Served
from tests.waiting import slow


def wait_for_state(served: Served, timer_id: str, state: str) -> dict[str, object]:
    deadline = time.monotonic() + slow(10)
    while True:
        status, info = served.request("GET", f"/v1/timers/{timer_id}")
        if status == 200 and info["state"] == state:
            return info  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, info
        time.sleep(0.01)


def test_schedule_show_cancel_over_http(served: Served) -> None:
    status, body = served.request(
        "POST",
        "/v1/timers",
        {"topic": "reminders", "value": "hi", "key": "k", "delay_ms": 50, "timer_id": "a:1"},
    )
    assert (status, body) == (200, {"timer_id": "a:1"})
    fired = wait_for_state(served, "a:1", "fired")
    assert (fired["partition"], fired["offset"], fired["topic"]) == (0, 0, "reminders")
    status, records = served.request("GET", "/v1/topics/reminders/records?offset=0")
    (record,) = records["records"]
    assert record["value"] == "hi" and record["headers"]["brook.timer.id"] == "a:1"
    status, body = served.request(
        "POST",
        "/v1/timers",
        {
            "timers": [
                {"topic": "reminders", "value_b64": "AAE=", "delay_ms": 3_600_000},
                {"topic": "reminders", "value": "x", "at": 4_000_000_000_000, "timer_id": "b"},
            ]
        },
    )
    assert status == 200 and len(body["timer_ids"]) == 2 and body["timer_ids"][1] == "b"
    assert served.request("DELETE", "/v1/timers/b") == (200, {"cancelled": "b"})
    assert served.request("GET", "/v1/timers/b")[1]["state"] == "cancelled"
    status, error = served.request("DELETE", "/v1/timers/b")
    assert status == 409 and error["error"]["code"] == "timer_not_cancellable"
    assert "cancelled" in error["error"]["message"]
    status, error = served.request("DELETE", "/v1/timers/a:1")
    assert status == 409 and "fired" in error["error"]["message"], "fired: not pending"
    status, error = served.request("DELETE", "/v1/timers/unknown")
    assert status == 404 and error["error"]["code"] == "timer_not_found"
    assert served.request("GET", "/v1/timers/unknown")[0] == 404
    status, text = served.request("GET", "/metrics")
    assert "brook_timers_pending 1.0" in text
    assert "brook_timers_fired_total 1.0" in text
    assert 'brook_timer_fire_lag_seconds_bucket{le="+Inf"} 1.0' in text


@pytest.mark.parametrize(
    "body",
    [
        {"value": "no topic"},
        {"topic": "t"},
        {"topic": "t", "value": "v", "at": 1, "delay_ms": 1},
        {"topic": "t", "value": "v", "delay_ms": -1},
        {"topic": "t", "value": "v", "timer_id": "no spaces"},
        {"topic": "t", "value": "v", "colour": "blue"},
        {"topic": "__internal", "value": "v"},
        {"timers": "nope"},
        {"timers": [1]},
        [1, 2],
    ],
)
def test_bad_timers_get_400(served: Served, body: object) -> None:
    status, error = served.request("POST", "/v1/timers", body)
    assert status == 400 and error["error"]["code"] in ("bad_request", "invalid_name"), error
