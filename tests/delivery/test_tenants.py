"""Many endpoints on one broker: dead letters never cascade through patterns, and one
endpoint's failure is its own (SPEC §7, §11).

The cascade that used to happen: two endpoints on `x.*` whose receivers answer 400,
max_attempts 1. Endpoint a's dead letters landed in `x.1.a.dlq`, which b's pattern
took, whose dead letters a's pattern took, and so on, until a derived name was too
long, the delivery loop failed as a whole and a healthy third endpoint stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.errors import StorageError
from brook.queue.shell import QueueGroup
from tests.delivery.receivers import Answer, Receiver, wait_for
from tests.in_process import InProcess
from tests.served import Served

RECONCILE_WAIT_S = 3.0
"""Longer than the delivery loop's reconcile period: topics made since are looked at."""


class Surface:
    """The same checks embedded and through `brook serve`."""

    def __init__(self, broker: Any, health: Callable[[], tuple[int, Any]]) -> None:
        self.b = broker
        self.health = health


@pytest.fixture(params=["embedded", "served"])
def surface(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Surface]:
    if request.param == "embedded":
        with brook.open(str(tmp_path / "data"), delivery_allow_private_networks=True) as b:
            yield Surface(b, lambda: (200 if not b.supervisor.failing() else 503, None))
        return
    config = tmp_path / "brook.toml"
    config.write_text("delivery_allow_private_networks = true\n")
    served = Served(tmp_path / "data", config=config)
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}") as b:
            yield Surface(b, lambda: served.request("GET", "/v1/health"))
    finally:
        served.close()


def test_dead_letters_do_not_cascade_and_a_healthy_endpoint_gets_every_record(
    surface: Surface,
) -> None:
    b = surface.b
    with Receiver(lambda got: Answer(400)) as refusing, Receiver() as healthy:
        for name in ("a", "b"):
            b.create_endpoint(name, refusing.url, ["x.*"], max_attempts=1)
        b.create_endpoint("c", healthy.url, ["x.*"])
        b.topic("x.1").append(b"first")
        wait_for(lambda: b.endpoint("a").stats().dead == 1 and b.endpoint("b").stats().dead == 1)
        time.sleep(RECONCILE_WAIT_S)  # a cascade would go on here
        b.topic("x.1").append_many([brook.Record(b"r%d" % i) for i in range(20)])
        wait_for(lambda: len(healthy.requests()) == 21, 30)
        assert sorted(g.body for g in healthy.requests())[0] == b"first"
        wait_for(lambda: b.endpoint("a").stats().dead == 21 and b.endpoint("b").stats().dead == 21)
        time.sleep(RECONCILE_WAIT_S)
        names = sorted(t.name for t in b.topics())
        assert names == ["x.1", "x.1.a.dlq", "x.1.b.dlq"]
        assert b.topic("x.1.a.dlq").end_offsets() == {0: 21}
        assert refusing.requests() and all(
            g.headers["brook-topic"] == "x.1" for g in refusing.requests()
        ), "no endpoint took another's dead letters"
        status, _ = surface.health()
        assert status == 200
        for name in ("a", "b", "c"):
            assert b.endpoint(name).stats().failing == ""


def test_a_pattern_naming_the_dead_letters_gets_them_and_theirs_stay_in_place(
    tmp_path: Path,
) -> None:
    with (
        brook.open(str(tmp_path / "data"), delivery_allow_private_networks=True) as b,
        Receiver(lambda got: Answer(400)) as refusing,
        Receiver(lambda got: Answer(400)) as alerts,
    ):
        b.create_endpoint("a", refusing.url, ["x.*"], max_attempts=1)
        b.create_endpoint("dead", alerts.url, ["*.dlq"], max_attempts=1, start="earliest")
        b.topic("x.1").append(b"lost cause")
        wait_for(lambda: [g.headers["brook-topic"] for g in alerts.requests()] == ["x.1.a.dlq"])
        got = alerts.requests()[0]
        assert got.body == b"lost cause"
        wait_for(lambda: b.endpoint("dead").stats().dead == 1)
        time.sleep(RECONCILE_WAIT_S)
        assert sorted(t.name for t in b.topics()) == ["x.1", "x.1.a.dlq"], (
            "a dead letter that dies again stays dead in its group, copied nowhere"
        )
        assert b.endpoint("dead").redrive() == 1, "and can be redriven from there"


def test_a_dead_letter_topic_name_too_long_is_derived_valid_and_bounded(tmp_path: Path) -> None:
    long_topic = "t" * 190
    with (
        brook.open(str(tmp_path / "data"), delivery_allow_private_networks=True) as b,
        Receiver(lambda got: Answer(400)) as refusing,
        Receiver() as healthy,
    ):
        b.create_endpoint("refusing-endpoint", refusing.url, [long_topic], max_attempts=1)
        b.create_endpoint("healthy", healthy.url, [long_topic])
        b.topic(long_topic).append(b"v")
        wait_for(lambda: b.endpoint("refusing-endpoint").stats().dead == 1)
        wait_for(lambda: len(b.topics()) == 2)
        (dead,) = [t.name for t in b.topics() if t.name != long_topic]
        assert len(dead) == 200 and dead.endswith(".dlq") and dead.startswith(long_topic[:150])
        assert b.topic(dead).read(0, 0)[0].value == b"v"
        assert [g.body for g in healthy.requests()] == [b"v"]
        assert not b.supervisor.failing() and not b.supervisor.isolated()


def test_a_failing_dead_letter_append_is_that_endpoints_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_copy = QueueGroup._copy_dead
    broken = {"on": True}

    def copy_dead(group: QueueGroup, *args: Any) -> None:
        if broken["on"] and group.group.endswith(".a"):
            raise StorageError("the dead-letter topic could not be written (injected)")
        real_copy(group, *args)

    monkeypatch.setattr(QueueGroup, "_copy_dead", copy_dead)
    with (
        brook.open(str(tmp_path / "data"), delivery_allow_private_networks=True) as b,
        Receiver(lambda got: Answer(400)) as refusing,
        Receiver() as healthy,
    ):
        b.create_endpoint("a", refusing.url, ["x"], max_attempts=1)
        b.create_endpoint("c", healthy.url, ["x"])
        b.topic("x").append_many([brook.Record(b"%d" % i) for i in range(10)])
        wait_for(lambda: "dead letters" in b.endpoint("a").stats().failing)
        stats = b.endpoint("a").stats()
        assert "injected" in stats.failing and stats.failing_since_ms is not None
        b.topic("x").append_many([brook.Record(b"%d" % i) for i in range(10, 20)])
        wait_for(lambda: len(healthy.requests()) == 20)
        assert b.endpoint("c").stats().failing == ""
        assert not b.supervisor.failing(), "the broker's loops are not failing"
        (isolated,) = {f.subject for f in b.supervisor.isolated()}
        assert isolated == "queue group x/__endpoint.a"
        broken["on"] = False
        wait_for(lambda: b.endpoint("a").stats().failing == "", 30)
        wait_for(lambda: b.topic("x.a.dlq").end_offsets() == {0: 20})


def test_health_names_a_failing_endpoint_in_its_detail_and_answers_200(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def copy_dead(group: QueueGroup, *args: Any) -> None:
        raise StorageError("dead letters refused (injected)")

    monkeypatch.setattr(QueueGroup, "_copy_dead", copy_dead)
    with (
        brook.open(str(tmp_path / "data"), delivery_allow_private_networks=True) as b,
        Receiver(lambda got: Answer(400)) as refusing,
    ):
        b.create_endpoint("a", refusing.url, ["x"], max_attempts=1)
        b.topic("x").append(b"v")
        wait_for(lambda: b.supervisor.isolated() != [])
        server = InProcess(b)
        try:
            status, body = server.get("/v1/health")
            assert status == 200
            assert body["status"] == "ok" and body["isolated_count"] == 1
            (detail,) = body["isolated"]
            assert detail["subject"] == "queue group x/__endpoint.a"
            assert detail["task"] == "dead letters" and "injected" in detail["error"]
            status, stats = server.get("/v1/endpoints/a/stats")
            assert stats["failing"].startswith("dead letters:")
            _, metrics = server.request_text("GET", "/metrics")
            assert 'brook_delivery_failing{endpoint="a"} 1.0' in metrics
        finally:
            server.close()
