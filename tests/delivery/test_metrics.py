"""/metrics at many endpoints (SPEC §7: metrics per endpoint bounded): aggregates over
every endpoint, and series of their own only for the endpoints failing now and those
chosen with `metrics_endpoints`, at most limits.metrics_endpoints_shown_max of them,
the failing ones first."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

import brook
from brook import limits
from brook.delivery.summary import Chosen, shown
from brook.errors import BadRequest
from tests.delivery.receivers import Answer, Receiver, wait_for
from tests.in_process import InProcess

IDLE = 300
SLOW = {"min_ms": 60_000, "max_ms": 60_000}
"""A failing endpoint's next attempt waits a minute: it stays failing through the test."""


def scrape(b: brook.Broker) -> str:
    server = InProcess(b)
    try:
        status, text = server.request_text("GET", "/metrics")
    finally:
        server.close()
    assert status == 200
    return text


def samples(text: str) -> dict[str, float]:
    """Each sample line of the exposition, `name{labels}` -> value."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            found[series] = float(value)
    return found


def with_own_series(text: str) -> set[str]:
    """The endpoints with series of their own, in any family that names them."""
    return set(re.findall(r'endpoint="([^"]+)"', text)) | set(
        re.findall(r'group="__endpoint\.([^"]+)"', text)
    )


@pytest.fixture
def receivers() -> Iterator[tuple[Receiver, Receiver, Receiver]]:
    with (
        Receiver() as ok,
        Receiver(lambda got: Answer(500)) as failing,
        Receiver(lambda got: Answer(410)) as gone,
    ):
        yield ok, failing, gone


def test_idle_endpoints_are_in_the_aggregates_only(
    receivers: tuple[Receiver, Receiver, Receiver],
) -> None:
    ok, failing, gone = receivers
    with brook.open(
        "memory://",
        delivery_allow_private_networks=True,
        metrics_endpoints=["chosen-*", "exact"],
    ) as b:
        b.create_topic("quiet")
        for n in range(IDLE):
            b.create_endpoint(f"idle-{n:03d}", f"https://idle-{n}.example/hook", ["quiet"])
        b.create_endpoint("healthy", ok.url, ["orders"])
        b.create_endpoint("chosen-a", ok.url, ["orders"])
        b.create_endpoint("exact", ok.url, ["quiet"])
        b.create_endpoint("broken", failing.url, ["orders"], backoff=SLOW)
        b.create_endpoint("gone", gone.url, ["orders"])
        b.create_endpoint("off", ok.url, ["orders"], enabled=False)
        b.topic("orders").append(b"one")
        wait_for(lambda: b.delivery_summary().attempts == {"ack": 2, "retry": 1, "disable": 1})
        text = scrape(b)
    found = samples(text)
    assert found['brook_delivery_all_attempts_total{outcome="ack"}'] == 2
    assert found['brook_delivery_all_attempts_total{outcome="retry"}'] == 1
    assert found['brook_delivery_all_responses_total{status="500"}'] == 1
    assert found["brook_delivery_all_latency_seconds_count"] == 4
    assert found["brook_delivery_all_in_flight"] == 0
    assert found["brook_delivery_all_backlog"] == 3, "broken's retry; gone's and off's wait"
    assert found['brook_delivery_endpoints{state="healthy"}'] == IDLE + 3
    assert found['brook_delivery_endpoints{state="failing"}'] == 1
    assert found['brook_delivery_endpoints{state="disabled"}'] == 2
    assert sum(v for k, v in found.items() if k.startswith("brook_delivery_breakers{")) == IDLE + 6
    assert found["brook_delivery_endpoints_left_out"] == 0
    # Failing now (broken, and gone: disabled by its 410), or chosen: never the idle,
    # the healthy or the one disabled by hand.
    assert with_own_series(text) == {"broken", "gone", "chosen-a", "exact"}
    assert found['brook_delivery_attempts_total{endpoint="broken",outcome="retry"}'] == 1
    assert found['brook_delivery_attempts_total{endpoint="chosen-a",outcome="ack"}'] == 1
    assert found['brook_delivery_backlog{endpoint="exact"}'] == 0
    assert found['brook_queue_records{group="__endpoint.broken",state="retrying",topic="orders"}']
    assert len(text.splitlines()) < 400, f"{IDLE} idle endpoints cost no lines"


def test_the_failing_come_first_and_the_cap_holds(
    receivers: tuple[Receiver, Receiver, Receiver],
) -> None:
    _, failing, _ = receivers
    cap = limits.metrics_endpoints_shown_max
    count = cap + 20
    with brook.open(
        "memory://", delivery_allow_private_networks=True, metrics_endpoints=["chosen"]
    ) as b:
        b.create_endpoint("chosen", "https://chosen.example/hook", ["quiet"])
        for n in range(count):
            b.create_endpoint(f"broken-{n:03d}", failing.url, ["alerts"], backoff=SLOW)
        b.topic("alerts").append(b"alert")
        wait_for(lambda: b.delivery_summary().endpoints["failing"] == count)
        text = scrape(b)
    found = samples(text)
    assert found['brook_delivery_endpoints{state="failing"}'] == count
    assert found['brook_delivery_all_attempts_total{outcome="retry"}'] == count
    assert found["brook_delivery_endpoints_left_out"] == count - cap + 1, "and chosen"
    assert with_own_series(text) == {f"broken-{n:03d}" for n in range(cap)}
    groups = set(re.findall(r'group="__endpoint\.([^"]+)"', text))
    assert groups == {f"broken-{n:03d}" for n in range(limits.metrics_endpoint_groups_shown_max)}
    assert f"at most {cap}" in text, "the HELP says the rest are aggregated"


def test_the_endpoints_shown_are_failing_first_each_by_name() -> None:
    assert shown(["f3", "f1"], ["c2", "c1"], 10) == (["f1", "f3", "c1", "c2"], 0)
    assert shown(["f3", "f1", "f2"], ["c1"], 2) == (["f1", "f2"], 2)
    assert shown([], ["c2", "c1"], 1) == (["c1"], 1)


def test_endpoints_are_chosen_by_name_or_glob_pattern() -> None:
    chosen = Chosen(["acme", "billing-*", "eu-[ab]"])
    assert "acme" in chosen and "billing-7" in chosen and "eu-a" in chosen
    assert "acme-2" not in chosen and "eu-c" not in chosen and "billing" not in chosen
    assert "anything" not in Chosen()
    for bad in (["a b"], ["x/y"], "acme", [""]):
        with pytest.raises(BadRequest, match="metrics_endpoints"):
            Chosen(bad)


def test_a_bad_pattern_is_refused_when_the_broker_opens() -> None:
    with pytest.raises(BadRequest, match="metrics_endpoints"):
        brook.open("memory://", metrics_endpoints=["no spaces"])
