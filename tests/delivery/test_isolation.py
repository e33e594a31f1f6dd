"""One endpoint failing and one hanging do not slow a healthy one (SPEC §7, isolation);
the breaker opens, probes and closes; the rate limit holds; key order survives retries."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from brook import limits
from brook.delivery.endpoint import GROUP_PREFIX
from brook.errors import NotFound
from tests.delivery.receivers import Answer, Got, Receiver, wait_for


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[brook.Broker]:
    with brook.open(str(tmp_path / "data"), delivery_allow_private_networks=True) as b:
        yield b


def acked(b: brook.Broker, topic: str, name: str) -> int:
    try:
        group = b.queues.group(topic, GROUP_PREFIX + name, create=False, internal=True)
    except NotFound:
        return 0
    count: int = group.counts()["acked"]
    return count


def deliver(b: brook.Broker, topic: str, count: int, name: str) -> float:
    """Seconds until `count` more records appended to `topic` are acked by `name`."""
    before = acked(b, topic, name)
    started = time.monotonic()
    records = [brook.Record(b"x" * 100) for _ in range(count)]
    for i in range(0, count, 500):
        b.topic(topic).append_many(records[i : i + 500])
    wait_for(lambda: acked(b, topic, name) >= before + count, 120)
    return time.monotonic() - started


def test_a_healthy_endpoint_keeps_its_pace_beside_a_failing_and_a_hanging_one(
    broker: brook.Broker,
) -> None:
    hang = threading.Event()

    def hanging(got: Got) -> Answer:
        hang.wait(30)
        return Answer(200)

    with (
        Receiver() as healthy,
        Receiver(lambda got: Answer(500)) as failing,
        Receiver(hanging) as stuck,
    ):
        broker.create_endpoint("healthy", healthy.url, ["t"])
        deliver(broker, "t", 200, "healthy")  # warm up: connections, threads
        solo = deliver(broker, "t", 1500, "healthy")
        broker.create_endpoint(
            "failing", failing.url, ["t"], backoff={"min_ms": 100, "max_ms": 1000}
        )
        broker.create_endpoint("stuck", stuck.url, ["t"], timeout_ms=60_000)
        beside = deliver(broker, "t", 1500, "healthy")
        assert broker.endpoint("stuck").stats().in_flight == 16, "its budget is full"
        assert broker.endpoint("failing").stats().breaker in ("open", "half_open")
        hang.set()
    ratio = solo / beside
    print(f"healthy beside failing and hanging: {ratio:.2f} of its solo pace")
    assert ratio >= 0.5


def test_the_breaker_opens_probes_and_closes(broker: brook.Broker) -> None:
    failing = threading.Event()
    failing.set()

    def answer(got: Got) -> Answer:
        return Answer(503 if failing.is_set() else 200)

    with Receiver(answer) as receiver:
        broker.create_endpoint(
            "hook", receiver.url, ["t"], backoff={"min_ms": 10, "max_ms": 10, "jitter": 0}
        )
        broker.topic("t").append_many([brook.Record(b"%d" % i) for i in range(20)])
        wait_for(lambda: broker.endpoint("hook").stats().breaker == "open")
        # Attempts sent before it opened end in their own time; then nothing more is sent.
        wait_for(lambda: broker.endpoint("hook").stats().in_flight == 0)
        sent = len(receiver.requests())
        time.sleep(2.5)
        # While it is open only probes go out, one after a pause of 1 s, the next after 2 s.
        probes = len(receiver.requests()) - sent
        assert 1 <= probes <= 2, f"{probes} requests in 2.5 s of an open breaker"
        failing.clear()
        wait_for(lambda: acked(broker, "t", "hook") == 20, 30)  # the next probe, within 5 s
        assert broker.endpoint("hook").stats().breaker == "closed"


def test_the_rate_limit_holds_over_every_second(broker: brook.Broker) -> None:
    with Receiver() as receiver:
        broker.create_endpoint("hook", receiver.url, ["t"], rate_limit_per_s=20)
        broker.topic("t").append_many([brook.Record(b"%d" % i) for i in range(60)])
        wait_for(lambda: len(receiver.requests()) == 60, 30)
    times = sorted(g.at for g in receiver.requests())
    for i, start in enumerate(times):
        within = sum(1 for t in times[i:] if t < start + 1.0)
        assert within <= 21, f"{within} requests within one second"  # 1.05 x 20
    assert times[-1] - times[0] >= 2.5


def test_records_of_a_key_arrive_in_order_through_retries(broker: brook.Broker) -> None:
    failed: set[bytes] = set()

    def answer(got: Got) -> Answer:
        if got.body.endswith(b"-3") and got.body not in failed:
            failed.add(got.body)
            return Answer(500)  # the fourth record of each key fails once
        return Answer(200)

    with Receiver(answer) as receiver:
        broker.create_endpoint(
            "hook",
            receiver.url,
            ["t"],
            ordering="key",
            backoff={"min_ms": 50, "jitter": 0},
        )
        records = [
            brook.Record(b"%s-%d" % (key, i), key=key) for i in range(10) for key in (b"a", b"b")
        ]
        broker.topic("t").append_many(records)
        wait_for(lambda: acked(broker, "t", "hook") == 20, 30)
    for key in (b"a", b"b"):
        delivered = [g.body for g in receiver.requests() if g.body.startswith(key + b"-")]
        first_success = [body for i, body in enumerate(delivered) if body not in delivered[:i]]
        assert first_success == [b"%s-%d" % (key, i) for i in range(10)]


def test_redrive_expiry_and_a_disabled_endpoint_keeping_its_records(
    broker: brook.Broker,
) -> None:
    answers: dict[str, Any] = {"status": 400}

    with Receiver(lambda got: Answer(answers["status"])) as receiver:
        broker.create_endpoint("hook", receiver.url, ["t"])
        broker.topic("t").append_many([brook.Record(b"1"), brook.Record(b"2")])
        wait_for(lambda: broker.endpoint("hook").stats().dead == 2)
        answers["status"] = 200
        assert broker.endpoint("hook").redrive(topic="t", limit=1) == 1
        wait_for(lambda: acked(broker, "t", "hook") == 1)
        assert broker.endpoint("hook").redrive() == 1
        wait_for(lambda: acked(broker, "t", "hook") == 2)
        broker.endpoint("hook").disable()
        broker.topic("t").append(b"waits")
        time.sleep(0.5)
        assert broker.endpoint("hook").stats().ready == 1
        assert len(receiver.requests()) == 4
        broker.create_endpoint("hook", expire_after_ms=1, enabled=True)
        wait_for(lambda: broker.endpoint("hook").stats().dead == 1)
        assert len(receiver.requests()) == 4, "expired before it was sent"


def test_ordered_records_do_not_wait_for_the_loops_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key's next record is ready only once the last one's ack (or retry) is durable;
    the loop is told then, rather than finding it at its next look at every endpoint
    (that look made ordered delivery stall 5 s at a time)."""

    monkeypatch.setattr(limits, "delivery_sweep_s", 120.0)
    failed: set[bytes] = set()

    def answer(got: Got) -> Answer:
        if got.body.endswith(b"-4") and got.body not in failed:
            failed.add(got.body)
            return Answer(400)  # dead at once: the key's lane must flow on
        return Answer(200)

    with (
        brook.open(str(tmp_path / "data"), delivery_allow_private_networks=True) as b,
        Receiver(answer) as receiver,
    ):
        b.create_endpoint("hook", receiver.url, ["t"], ordering="key")
        keys = (b"a", b"b", b"c")
        b.topic("t").append_many(
            [brook.Record(b"%s-%d" % (k, i), key=k) for i in range(12) for k in keys]
        )
        wait_for(lambda: acked(b, "t", "hook") == 33, 30)  # 3 of 36 died
        for key in keys:
            got = [g.body for g in receiver.requests() if g.body.startswith(key + b"-")]
            assert got == [b"%s-%d" % (key, i) for i in range(12)]
