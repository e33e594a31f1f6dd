"""Endpoints on every surface: embedded, brook.connect, brook.connect_async, HTTP, CLI."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from standardwebhooks.webhooks import Webhook

import brook
from brook.cli import main
from brook.errors import BadRequest, EndpointNotFound
from tests.delivery.receivers import Answer, Got, Receiver, wait_for
from tests.served import Served


@pytest.fixture
def chosen(tmp_path: Path) -> Iterator[Served]:
    """`served`, with endpoint `hook` chosen for series of its own in /metrics while it
    is healthy (brook.toml's metrics_endpoints)."""
    config = tmp_path / "brook.toml"
    config.write_text('delivery_allow_private_networks = true\nmetrics_endpoints = ["hook"]\n')
    server = Served(tmp_path / "data", config=config)
    yield server
    server.close()


def test_the_remote_client_creates_shows_and_deletes_endpoints(chosen: Served) -> None:
    served = chosen
    with Receiver() as receiver, brook.connect(f"http://127.0.0.1:{served.port}") as b:
        made = b.create_endpoint("hook", receiver.url, ["orders"], max_attempts=3)
        assert made.secret is not None and made.max_attempts == 3
        assert [e.name for e in b.endpoints()] == ["hook"]
        assert b.endpoints()[0].secret is None, "a secret is shown once"
        b.topic("orders").append(b"hello")
        wait_for(lambda: [g.body for g in receiver.requests()] == [b"hello"])
        Webhook(made.secret).verify(b"hello", receiver.requests()[0].headers, json_parse=False)
        handle = b.endpoint("hook")
        wait_for(lambda: handle.stats().acked == 1)
        stats = handle.stats()
        assert stats.breaker == "closed" and stats.success_rate == 1.0
        _, metrics = served.request("GET", "/metrics")
        assert 'brook_delivery_attempts_total{endpoint="hook",outcome="ack"} 1.0' in metrics
        assert 'brook_delivery_responses_total{endpoint="hook",status="200"} 1.0' in metrics
        assert 'brook_delivery_latency_seconds_count{endpoint="hook"} 1.0' in metrics
        assert 'brook_delivery_backlog{endpoint="hook"} 0.0' in metrics
        assert 'brook_delivery_breaker_open{endpoint="hook",state="closed"} 0.0' in metrics
        attempts = handle.attempts("orders", 0, 0)
        assert [(a.attempt, a.status, a.state) for a in attempts] == [(1, 200, "acked")]
        assert handle.disable().enabled is False
        assert handle.enable().enabled is True
        result = handle.test()
        assert result.status == 200
        test_request = receiver.requests()[-1]
        assert test_request.headers["webhook-id"].startswith("test:")
        Webhook(made.secret).verify(test_request.body, test_request.headers, json_parse=False)
        new_secret = handle.rotate_secret()
        assert new_secret != made.secret
        b.delete_endpoint("hook")
        with pytest.raises(EndpointNotFound):
            b.endpoint("hook")
        with pytest.raises(BadRequest):
            b.create_endpoint("new", receiver.url)  # no topics


def test_the_async_client_has_the_same_endpoints(served: Served) -> None:
    async def run() -> None:
        async with brook.connect_async(f"http://127.0.0.1:{served.port}") as b:
            made = await b.create_endpoint("a", "https://hooks.example.com/x", ["t"])
            assert made.secret is not None
            handle = await b.endpoint("a")
            assert (await handle.stats()).ready == 0
            assert [e.name for e in await b.endpoints()] == ["a"]
            await b.delete_endpoint("a")

    asyncio.run(run())


def test_http_answers_for_bad_endpoints(served: Served) -> None:
    for url in ("ftp://x", "http://[::1", "http://a b/"):
        status, answer = served.request("PUT", "/v1/endpoints/x", {"url": url, "topics": ["t"]})
        assert status == 400, (url, answer)
    status, answer = served.request(
        "PUT", "/v1/endpoints/x", {"url": "https://a.example", "topics": ["t"], "bogus": 1}
    )
    assert status == 400
    for reserved in (["__internal"], ["t", "__status.*"]):
        status, answer = served.request(
            "PUT", "/v1/endpoints/x", {"url": "https://a.example", "topics": reserved}
        )
        assert status == 400 and "reserved" in answer["error"]["message"], answer
    status, answer = served.request("GET", "/v1/endpoints/nope")
    assert (status, answer["error"]["code"]) == (404, "endpoint_not_found")
    status, answer = served.request(
        "GET", "/v1/endpoints/nope/attempts?topic=t&partition=0&offset=0"
    )
    assert status == 404


def test_the_command_line_manages_endpoints(served: Served) -> None:
    def answer(got: Got) -> Answer:
        return Answer(500)

    with Receiver(answer) as receiver:
        url = f"http://127.0.0.1:{served.port}"
        runner = CliRunner()

        def run(*args: str) -> tuple[int, str]:
            result = runner.invoke(main, [*args, "--url", url])
            return result.exit_code, result.output

        code, out = run(
            "endpoints",
            "create",
            "hook",
            receiver.url,
            "--topic",
            "jobs",
            "--max-attempts",
            "2",
            "--backoff-min-ms",
            "50",
            "--backoff-max-ms",
            "100",
        )
        assert code == 0 and "secret (shown once" in out and "max_attempts: 2" in out
        assert "backoff: min_ms 50, factor 2, max_ms 100" in out, out
        code, out = run("endpoints", "create", "hook", "--backoff-factor", "3")
        assert "backoff: min_ms 50, factor 3, max_ms 100" in out, "the other parts are kept"
        code, out = run("endpoints", "list")
        assert out.startswith("hook\tenabled\t")
        with brook.connect(url) as b:
            b.topic("jobs").append(b"x")
            wait_for(lambda: b.endpoint("hook").stats().dead == 1, 30)
        code, out = run("endpoints", "attempts", "hook", "jobs", "0", "0")
        assert code == 0 and out.count("\t500\t") == 2
        assert out.splitlines()[0].split("\t")[:3] == ["attempt", "at", "status or error"]
        code, out = run("endpoints", "show", "hook")
        assert "dead: 1" in out and "last error: 500" in out
        receiver.answer = lambda got: Answer(200)
        code, out = run("endpoints", "redrive", "hook")
        assert out == "redriven: 1 record\n"
        code, out = run("endpoints", "test", "hook")
        assert code == 0 and out.startswith("200\t")
        code, out = run("endpoints", "delete", "hook")
        assert code == 0
        code, out = run("endpoints", "show", "hook")
        assert code == 1 and "endpoint_not_found" in out


@pytest.mark.parametrize("where", ["embedded", "remote"])
def test_a_message_s_attempts_are_found_by_its_webhook_id_across_endpoints(
    served: Served, tmp_path: Path, where: str
) -> None:
    """What a receiver logs is the webhook-id; from it, every endpoint's attempts."""
    failing = Receiver(lambda got: Answer(503))
    with Receiver() as healthy, failing:
        context = (
            brook.connect(f"http://127.0.0.1:{served.port}")
            if where == "remote"
            else brook.open(str(tmp_path / "embedded"), delivery_allow_private_networks=True)
        )
        with context as b:
            b.create_endpoint("good", healthy.url, ["orders"])
            b.create_endpoint("flaky", failing.url, ["orders"], backoff={"min_ms": 50})
            b.create_endpoint("other", healthy.url, ["invoices"])
            b.topic("orders").append_many([brook.Record(b"first"), brook.Record(b"second")])
            wait_for(lambda: len(healthy.requests()) == 2)
            message = next(g for g in healthy.requests() if g.body == b"second")

            def found_now() -> dict[str, list[brook.models.Attempt]]:
                attempts = b.message_attempts(message.headers["webhook-id"])
                return {m.endpoint: m.attempts for m in attempts}

            wait_for(lambda: len(found_now().get("flaky", [])) >= 2)
            found = found_now()
            assert set(found) == {"good", "flaky"}, "only the endpoints that tried it"
            assert [(a.status, a.state) for a in found["good"]] == [(200, "acked")]
            assert len(found["flaky"]) >= 2 and {a.status for a in found["flaky"]} == {503}
            assert b.message_attempts("orders:0:99") == []
            # Shaped like no id of Brook's, these may be a sender's event ids (a record's
            # brook.event-id): no record carries them, so no endpoint tried them.
            for unknown in ("test:0123", "orders:0", "orders:x:1", "__status:0:1"):
                assert b.message_attempts(unknown) == []
            for bad in ("has space", "é", "x" * 300, "a,b"):
                with pytest.raises(BadRequest, match="webhook-id"):
                    b.message_attempts(bad)
    if where == "remote":
        url = f"http://127.0.0.1:{served.port}"
        result = CliRunner().invoke(main, ["endpoints", "message", "orders:0:1", "--url", url])
        lines = result.stdout.splitlines()
        assert result.exit_code == 0 and lines[0].startswith("endpoint\tattempt\t"), result.output
        assert {line.split("\t")[0] for line in lines[1:]} == {"good", "flaky"}
        result = CliRunner().invoke(main, ["endpoints", "message", "has space", "--url", url])
        assert result.exit_code == 1 and "is not a webhook-id" in result.output


@pytest.mark.parametrize("where", ["embedded", "remote"])
def test_an_endpoint_s_dead_records_are_grouped_by_what_they_died_of(
    served: Served, tmp_path: Path, where: str
) -> None:
    """The webhook sender's "why did these fail": one group per reason across the
    endpoint's topics (ids masked), most first, and the topic to narrow it to."""

    def answer(got: Got) -> Answer:
        return Answer(404, b"no such customer") if got.body.startswith(b"gone") else Answer(500)

    with Receiver(answer) as receiver:
        context = (
            brook.connect(f"http://127.0.0.1:{served.port}")
            if where == "remote"
            else brook.open(str(tmp_path / "embedded"), delivery_allow_private_networks=True)
        )
        with context as b:
            b.create_endpoint("hook", receiver.url, ["orders.*"], max_attempts=1)
            b.create_endpoint("quiet", receiver.url, ["other"])
            for topic in ("orders.eu", "orders.us"):
                b.topic(topic).append_many([brook.Record(b"gone 1"), brook.Record(b"gone 2")])
            b.topic("orders.us").append(b"broken")
            handle = b.endpoint("hook")
            wait_for(lambda: handle.stats().dead == 5, 30)
            everything = handle.dead_errors()
            assert [e.dead for e in everything] == [4, 1], everything
            assert "404" in everything[0].example and "500" in everything[1].example
            us = handle.dead_errors("orders.us")
            assert sorted(e.dead for e in us) == [1, 2]
            assert b.endpoint("quiet").dead_errors() == []
            with pytest.raises(brook.errors.TopicNotFound):
                handle.dead_errors("invoices")
            with pytest.raises(brook.errors.InvalidName):
                handle.dead_errors("no way")
            with pytest.raises(EndpointNotFound):
                b.endpoint("nope").dead_errors()
    if where == "remote":
        url = f"http://127.0.0.1:{served.port}"
        result = CliRunner().invoke(main, ["endpoints", "errors", "hook", "--url", url])
        lines = result.stdout.splitlines()
        assert result.exit_code == 0 and lines[0].startswith("4\t"), result.output
        assert len(lines) == 2 and "404" in lines[0]
        result = CliRunner().invoke(
            main, ["endpoints", "errors", "hook", "--topic", "x y", "--url", url]
        )
        assert result.exit_code == 1 and len(result.output.splitlines()) == 1, result.output
        status, _ = served.request("GET", "/v1/endpoints/hook/errors?topic=orders.eu&x=1")
        assert status == 400
