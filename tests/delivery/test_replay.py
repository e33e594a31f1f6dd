"""Replaying an endpoint: records already delivered sent again, from a time or an
offset, on every surface, and across a kill -9 of the broker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from standardwebhooks.webhooks import Webhook

import brook
from brook.cli import main
from brook.errors import BadRequest, PartitionNotFound, TopicNotFound
from tests.delivery.receivers import Answer, Got, Receiver, wait_for
from tests.served import Served


@pytest.mark.parametrize("where", ["embedded", "remote"])
def test_an_endpoint_replays_what_it_delivered_from_a_time_or_an_offset(
    served: Served, tmp_path: Path, where: str
) -> None:
    with Receiver() as hook, Receiver() as other:
        context = (
            brook.connect(f"http://127.0.0.1:{served.port}")
            if where == "remote"
            else brook.open(str(tmp_path / "embedded"), delivery_allow_private_networks=True)
        )
        with context as b:
            made = b.create_endpoint("hook", hook.url, ["orders"])
            b.create_endpoint("other", other.url, ["orders"])
            b.topic("orders").append_many([brook.Record(b"a"), brook.Record(b"b")])
            time.sleep(0.01)
            since_ms = int(time.time() * 1000)
            b.topic("orders").append_many([brook.Record(b"c"), brook.Record(b"d")])
            wait_for(lambda: len(hook.requests()) == 4 and len(other.requests()) == 4)
            wait_for(lambda: b.endpoint("hook").stats().acked == 4)
            first = {g.body: g.headers["webhook-id"] for g in hook.requests()}

            assert b.endpoint("hook").replay(since_ms=since_ms) == 2
            wait_for(lambda: len(hook.requests()) == 6)
            again = hook.requests()[4:]
            assert sorted(g.body for g in again) == [b"c", b"d"]
            for got in again:
                assert got.headers["webhook-id"] == first[got.body], "the same message"
                assert got.headers["brook-attempt"] == "1"
                assert made.secret is not None
                Webhook(made.secret).verify(got.body, got.headers, json_parse=False)

            wait_for(lambda: b.endpoint("hook").stats().acked == 6)
            assert b.endpoint("hook").replay(topic="orders", offset=1, partition=0) == 3
            wait_for(lambda: len(hook.requests()) == 9)
            assert sorted(g.body for g in hook.requests()[6:]) == [b"b", b"c", b"d"]
            wait_for(lambda: b.endpoint("hook").stats().acked == 9)
            assert b.endpoint("hook").replay(since_ms=0) == 4, "from the start, every topic"
            wait_for(lambda: len(hook.requests()) == 13)
            time.sleep(0.2)
            assert len(other.requests()) == 4, "another endpoint is not touched"
            assert len(hook.requests()) == 13, "each record once per replay"
            assert b.endpoint("hook").replay(since_ms=int(time.time() * 1000) + 60_000) == 0

            for bad, error, words in (
                ({}, BadRequest, "give one of them"),
                ({"offset": 1}, BadRequest, "needs the topic"),
                ({"since_ms": 1, "offset": 1, "topic": "orders"}, BadRequest, "give one"),
                ({"since_ms": 1, "partition": 0}, BadRequest, "partition goes with offset"),
                ({"since_ms": -1}, BadRequest, "since_ms"),
                ({"topic": "orders", "offset": 0, "partition": 7}, PartitionNotFound, "7"),
                ({"topic": "invoices", "since_ms": 0}, TopicNotFound, "invoices"),
            ):
                with pytest.raises(error, match=words):
                    b.endpoint("hook").replay(**bad)


def test_replay_over_http_and_the_command_line(served: Served) -> None:
    url = f"http://127.0.0.1:{served.port}"
    with Receiver() as hook, brook.connect(url) as b:
        b.create_endpoint("hook", hook.url, ["orders"])
        b.topic("orders").append_many([brook.Record(b"%d" % i) for i in range(3)])
        wait_for(lambda: b.endpoint("hook").stats().acked == 3)
        status, answer = served.request("POST", "/v1/endpoints/hook/replay", {"since_ms": 0})
        assert (status, answer) == (200, {"replayed": 3})
        wait_for(lambda: b.endpoint("hook").stats().acked == 6)
        for body in ({}, {"since_ms": "yesterday"}, {"since_ms": 0, "bogus": 1}, [1]):
            status, answer = served.request("POST", "/v1/endpoints/hook/replay", body)
            assert status == 400, (body, answer)
        status, answer = served.request("POST", "/v1/endpoints/nope/replay", {"since_ms": 0})
        assert (status, answer["error"]["code"]) == (404, "endpoint_not_found")

        runner = CliRunner()
        result = runner.invoke(main, ["endpoints", "replay", "hook", "--since", "1h", "--url", url])
        assert (result.exit_code, result.output) == (0, "sent again: 3 records\n")
        wait_for(lambda: b.endpoint("hook").stats().acked == 9)
        result = runner.invoke(
            main,
            ["endpoints", "replay", "hook", "--topic", "orders", "--offset", "2", "--url", url],
        )
        assert (result.exit_code, result.output) == (0, "sent again: 1 record\n")
        for args, words in (
            (["--since", "yesterday"], "is not a time"),
            (["--offset", "2"], "needs the topic"),
            ([], "give one of them"),
        ):
            result = runner.invoke(main, ["endpoints", "replay", "hook", *args, "--url", url])
            assert result.exit_code != 0 and "Traceback" not in result.output, result.output
            assert words in result.output.strip().splitlines()[-1], "the error is one line"


def test_a_replay_answered_survives_a_kill_9_of_the_broker(tmp_path: Path) -> None:
    """Once `replay` has answered, the records go again even if the broker dies at once."""
    config = tmp_path / "brook.toml"
    config.write_text("delivery_allow_private_networks = true\n")
    failing = [False]

    def answer(got: Got) -> Answer:
        return Answer(503) if failing[0] else Answer(200)

    with Receiver(answer) as hook:
        server = Served(tmp_path / "data", config=config)
        try:
            with brook.connect(f"http://127.0.0.1:{server.port}") as b:
                b.create_endpoint("hook", hook.url, ["orders"], backoff={"min_ms": 50})
                b.topic("orders").append_many([brook.Record(b"%d" % i) for i in range(50)])
                wait_for(lambda: b.endpoint("hook").stats().acked == 50)
                failing[0] = True  # the resends fail: they stay to be sent when it dies
                assert b.endpoint("hook").replay(since_ms=0) == 50
        finally:
            server.close()  # kill -9
        failing[0] = False
        delivered = len(hook.requests())
        server = Served(tmp_path / "data", config=config)
        try:
            wait_for(
                lambda: (
                    {g.body for g in hook.requests()[delivered:]} >= {b"%d" % i for i in range(50)}
                ),
                30,
            )
        finally:
            server.close()
