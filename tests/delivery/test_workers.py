"""Delivery attempts sent by worker processes (`delivery_workers`): the same requests,
and nothing lost when a worker dies or when the broker does."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook

import brook
from brook.errors import BadRequest
from tests.delivery.receivers import Answer, Receiver, wait_for
from tests.served import Served


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) counts as gone.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_worker_sends_signed_requests_and_stops_with_the_broker(tmp_path: Path) -> None:
    with Receiver(lambda got: Answer(410 if got.body == b"gone" else 200)) as receiver:
        with brook.open(
            str(tmp_path), delivery_allow_private_networks=True, delivery_workers=2
        ) as b:
            made = b.create_endpoint("hook", receiver.url, ["orders"])
            b.topic("orders").append_many([brook.Record(b"%d" % i) for i in range(50)])
            wait_for(lambda: b.endpoint("hook").stats().acked == 50)
            assert made.secret is not None
            for got in receiver.requests():
                Webhook(made.secret).verify(got.body, got.headers, json_parse=False)
            assert sorted(g.body for g in receiver.requests()) == sorted(
                b"%d" % i for i in range(50)
            )
            assert b.endpoint("hook").test().status == 200
            workers = b.delivery.sender.pids()  # type: ignore[union-attr]
            assert len(workers) == 1, "one endpoint's attempts all go to one worker"
            b.topic("orders").append(b"gone")
            wait_for(lambda: not b.endpoint("hook").info().enabled)  # 410, judged by the broker
        time.sleep(0.2)
        assert not any(_alive(pid) for pid in workers), "closing the broker ends its workers"


def test_a_worker_killed_mid_stream_loses_nothing(tmp_path: Path) -> None:
    """kill -9 of the worker: its attempts in flight fail as connection errors, are
    retried, and a new worker sends them."""
    with (
        Receiver(lambda got: Answer(200, delay_s=0.01)) as receiver,
        brook.open(str(tmp_path), delivery_allow_private_networks=True, delivery_workers=1) as b,
    ):
        b.create_endpoint("hook", receiver.url, ["orders"], backoff={"min_ms": 20})
        values = [b"%d" % i for i in range(400)]
        b.topic("orders").append_many([brook.Record(v) for v in values])
        wait_for(lambda: len(receiver.requests()) >= 50)
        (first,) = b.delivery.sender.pids()  # type: ignore[union-attr]
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: b.endpoint("hook").stats().acked == 400, 60)
        assert {g.body for g in receiver.requests()} == set(values)
        (second,) = b.delivery.sender.pids()  # type: ignore[union-attr]
        assert second != first and _alive(second)
        attempts = b.endpoint("hook").stats()
        assert attempts.dead == 0


def test_the_workers_end_when_the_broker_is_killed(tmp_path: Path) -> None:
    config = tmp_path / "brook.toml"
    config.write_text("delivery_allow_private_networks = true\n")
    with Receiver() as receiver:
        server = Served(tmp_path / "data", "--delivery-workers", "1", config=config)
        try:
            with brook.connect(f"http://127.0.0.1:{server.port}") as b:
                b.create_endpoint("hook", receiver.url, ["orders"])
                b.topic("orders").append(b"x")
                wait_for(lambda: len(receiver.requests()) == 1)
            tasks = Path(f"/proc/{server.process.pid}/task")
            workers = [
                int(p) for t in tasks.iterdir() for p in (t / "children").read_text().split()
            ]
            assert workers, "the worker is the broker's child"
        finally:
            server.close()  # kill -9
        wait_for(lambda: not any(_alive(pid) for pid in workers), 10)


def test_a_fake_resolver_takes_the_broker_s_own_loop(tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="delivery_workers=0"):
        brook.open(str(tmp_path), delivery_workers=1, delivery_resolver=lambda h, p: ["1.2.3.4"])


def test_workers_get_the_private_network_rule(tmp_path: Path) -> None:
    """The address check runs in the worker, with the broker's setting: an endpoint
    made while private networks were allowed is refused once they are not."""
    with Receiver() as receiver:
        with brook.open(str(tmp_path), delivery_allow_private_networks=True) as b:
            b.create_endpoint("hook", receiver.url, ["t"], enabled=False)
        with brook.open(str(tmp_path), delivery_workers=1) as b:
            b.endpoint("hook").enable()
            b.topic("t").append(b"x")
            wait_for(lambda: b.endpoint("hook").stats().last_error != "")
            assert "loopback" in b.endpoint("hook").stats().last_error
        assert receiver.requests() == []
