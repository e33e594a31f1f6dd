"""Delivery end to end in an embedded broker, to real local HTTP receivers."""

from __future__ import annotations

import base64
import datetime
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from standardwebhooks.webhooks import Webhook

import brook
from brook import limits
from brook.cli import main
from brook.delivery.endpoint import GROUP_PREFIX
from brook.errors import BadRequest, NotFound
from tests.delivery.receivers import Answer, Got, Receiver, wait_for
from tests.served import Served


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[brook.Broker]:
    with brook.open(str(tmp_path / "data"), delivery_allow_private_networks=True) as b:
        yield b


def put(b: brook.Broker, name: str, **given: Any) -> tuple[Any, str | None]:
    return b.endpoint_store.put(name, given)


def group(b: brook.Broker, topic: str, name: str) -> Any:
    return b.queues.group(topic, GROUP_PREFIX + name, create=False, internal=True)


def stats(b: brook.Broker, topic: str, name: str) -> dict[str, int]:
    """The endpoint's group's counts ({} until the delivery loop made the group)."""
    try:
        counts: dict[str, int] = group(b, topic, name).stats()
    except NotFound:
        return {}
    return counts


def test_every_record_arrives_signed_with_its_bytes_and_headers(broker: brook.Broker) -> None:
    with Receiver() as receiver:
        broker.topic("orders").append(b"before the endpoint")  # not delivered: start=latest
        _, secret = put(broker, "hook", url=receiver.url, topics=["orders"])
        assert secret is not None and secret.startswith("whsec_")
        values = [f"order {i}".encode() for i in range(50)]
        acks = broker.topic("orders").append_many(
            [brook.Record(v, key=b"k%d" % (i % 3)) for i, v in enumerate(values)]
        )
        broker.topic("orders").append(
            b'{"json": true}', headers={"content-type": b"application/json"}
        )
        wait_for(lambda: len(receiver.requests()) >= 51)
        wait_for(lambda: stats(broker, "orders", "hook")["acked"] == 51)
        got = receiver.requests()
        assert sorted(g.body for g in got) == sorted([*values, b'{"json": true}'])
        verifier = Webhook(secret)
        for request in got:
            verifier.verify(request.body, request.headers, json_parse=False)
            offset = int(request.headers["brook-offset"])
            assert request.headers["webhook-id"] == f"orders:0:{offset}"
            assert request.headers["brook-topic"] == "orders"
            assert request.headers["brook-attempt"] == "1"
            if request.body == b'{"json": true}':
                assert request.headers["content-type"] == "application/json"
                assert "brook-key" not in request.headers
            else:
                assert request.headers["content-type"] == "application/octet-stream"
                key = base64.b64decode(request.headers["brook-key"])
                assert key == b"k%d" % ((offset - acks[0].offset) % 3)
        assert all(g.body != b"before the endpoint" for g in got)


def test_start_earliest_delivers_what_was_there(broker: brook.Broker) -> None:
    with Receiver() as receiver:
        broker.topic("old").append_many([brook.Record(b"a"), brook.Record(b"b")])
        put(broker, "hook", url=receiver.url, topics=["ol*"], start="earliest")
        wait_for(lambda: sorted(g.body for g in receiver.requests()) == [b"a", b"b"])


def test_a_topic_made_later_is_delivered_from_its_first_record(broker: brook.Broker) -> None:
    with Receiver() as receiver:
        put(broker, "hook", url=receiver.url, topics=["events.*"])
        broker.topic("events.signup").append(b"first")
        wait_for(lambda: [g.body for g in receiver.requests()] == [b"first"], 30)


def test_failures_are_retried_with_backoff_then_dead_letters(broker: brook.Broker) -> None:
    def answer(got: Got) -> Answer:
        return Answer(500, b"boom " * 1000)

    with Receiver(answer) as receiver:
        put(
            broker,
            "hook",
            url=receiver.url,
            topics=["jobs"],
            max_attempts=3,
            backoff={"min_ms": 10, "max_ms": 20, "jitter": 0},
        )
        broker.topic("jobs").append(b"doomed")
        wait_for(lambda: stats(broker, "jobs", "hook").get("dead") == 1)
        assert [g.headers["brook-attempt"] for g in receiver.requests()] == ["1", "2", "3"]
        trace = group(broker, "jobs", "hook").trace(0, 0)
        ended = [t for t in trace if t.outcome is not None]
        assert [t.outcome.status for t in ended] == [500, 500, 500]
        assert all(len(t.outcome.excerpt) == 2048 for t in ended)
        dead = broker.topic("jobs.hook.dlq").read(0, 0)
        assert [r.value for r in dead] == [b"doomed"]


def test_a_4xx_is_dead_at_once_and_410_disables(broker: brook.Broker) -> None:
    statuses = {b"bad": 400, b"gone": 410}

    def answer(got: Got) -> Answer:
        return Answer(statuses.get(got.body, 200))

    with Receiver(answer) as receiver:
        put(broker, "hook", url=receiver.url, topics=["t"])
        broker.topic("t").append(b"bad")
        wait_for(lambda: stats(broker, "t", "hook").get("dead") == 1)
        assert len(receiver.requests()) == 1
        broker.topic("t").append(b"gone")
        wait_for(lambda: not broker.endpoint_store.get("hook").settings.enabled)
        assert "410" in broker.endpoint_store.get("hook").disabled_reason
        broker.topic("t").append(b"waits")
        time.sleep(0.5)
        assert [g.body for g in receiver.requests()] == [b"bad", b"gone"]
        statuses.clear()
        broker.endpoint_store.set_enabled("hook", True)
        wait_for(lambda: stats(broker, "t", "hook").get("acked") == 2)
        assert sorted(g.body for g in receiver.requests()[2:]) == [b"gone", b"waits"]


def test_records_leased_ahead_go_back_unsent_when_the_endpoint_is_disabled(
    broker: brook.Broker,
) -> None:
    with Receiver(lambda got: Answer(delay_s=0.4)) as receiver:
        put(broker, "hook", url=receiver.url, topics=["t"], max_in_flight=2)
        broker.topic("t").append_many([brook.Record(b"%d" % i) for i in range(20)])
        wait_for(lambda: stats(broker, "t", "hook").get("leased", 0) > 2)  # some ahead
        broker.endpoint("hook").disable()
        wait_for(lambda: stats(broker, "t", "hook").get("leased") == 0)
        sent = {int(g.headers["brook-offset"]) for g in receiver.requests()}
        assert stats(broker, "t", "hook")["acked"] == len(sent) < 20
        unsent = [offset for offset in range(20) if offset not in sent]
        given_back = [
            offset
            for offset in unsent
            if any(
                t.reason == "released unsent" for t in group(broker, "t", "hook").trace(0, offset)
            )
        ]
        assert given_back, "no record was leased ahead and given back"
        for offset in unsent:  # no attempt spent on a record never sent
            assert broker.endpoint("hook").attempts("t", 0, offset) == []
        broker.endpoint("hook").enable()
        wait_for(lambda: stats(broker, "t", "hook").get("acked") == 20)
        assert {g.headers["brook-attempt"] for g in receiver.requests()} == {"1"}


def test_after_a_new_secret_both_sign_for_a_day(broker: brook.Broker) -> None:
    with Receiver() as receiver:
        _, old = put(broker, "hook", url=receiver.url, topics=["t"])
        new = broker.endpoint("hook").rotate_secret()
        broker.topic("t").append(b"signed twice")
        wait_for(lambda: len(receiver.requests()) == 1)
        (got,) = receiver.requests()
        assert len(got.headers["webhook-signature"].split(" ")) == 2
        for secret in (old, new):  # a receiver on either secret accepts it
            Webhook(secret).verify(got.body, got.headers, json_parse=False)
        # Its ack settled first: a lease still open when the clock jumps a day ends by
        # that clock, and the record is sent again (on a busy machine it was, and the
        # test, waiting for exactly two requests, saw three).
        wait_for(lambda: stats(broker, "t", "hook").get("acked") == 1)
        clock = broker.core.clock
        later = time.time() + 24 * 3600 + 1
        clock.wall = lambda: later
        try:
            broker.topic("t").append(b"signed once")
            wait_for(lambda: any(r.body == b"signed once" for r in receiver.requests()))
        finally:
            clock.wall = time.time
        (last,) = [r for r in receiver.requests() if r.body == b"signed once"]
        stamp = datetime.datetime.fromtimestamp(
            int(last.headers["webhook-timestamp"]), tz=datetime.UTC
        )
        assert stamp.timestamp() >= later - 60  # signed a day on, so too new for verify()
        expected = Webhook(new).sign(last.headers["webhook-id"], stamp, last.body.decode())
        assert last.headers["webhook-signature"] == expected  # the new secret's alone


def test_retry_after_is_honoured(broker: brook.Broker) -> None:
    calls: list[float] = []

    def answer(got: Got) -> Answer:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return Answer(429, headers={"retry-after": "1"})
        return Answer(200)

    with Receiver(answer) as receiver:
        put(broker, "hook", url=receiver.url, topics=["t"], backoff={"min_ms": 10, "jitter": 0})
        broker.topic("t").append(b"x")
        wait_for(lambda: stats(broker, "t", "hook").get("acked") == 1)
        assert calls[1] - calls[0] >= 0.95


def test_private_addresses_are_refused_unless_allowed(tmp_path: Path) -> None:
    with (
        brook.open(str(tmp_path / "data")) as b,
        pytest.raises(BadRequest, match="delivery_allow_private_networks"),
    ):
        put(b, "hook", url="http://127.0.0.1:9/hook", topics=["t"])


def test_a_name_that_resolves_to_a_private_address_is_refused_on_each_attempt(
    tmp_path: Path,
) -> None:
    answers = {"hooks.example.com": ["10.0.0.5"]}
    with brook.open(
        str(tmp_path / "data"), delivery_resolver=lambda host, port: answers[host]
    ) as b:
        put(
            b,
            "hook",
            url="http://hooks.example.com/x",
            topics=["t"],
            max_attempts=2,
            backoff={"min_ms": 10, "jitter": 0},
        )
        b.topic("t").append(b"x")
        wait_for(lambda: stats(b, "t", "hook").get("dead") == 1)
        trace = group(b, "t", "hook").trace(0, 0)
        errors = [t.outcome.error for t in trace if t.outcome is not None]
        assert errors and all("10.0.0.5, a private address" in e for e in errors)


def test_a_topic_added_to_an_endpoint_is_delivered_from_the_change_on(
    broker: brook.Broker,
) -> None:
    with Receiver() as receiver:
        broker.topic("old").append(b"history")
        put(broker, "hook", url=receiver.url, topics=["t"])
        put(broker, "hook", topics=["t", "old"])
        broker.topic("old").append(b"new")
        wait_for(lambda: stats(broker, "old", "hook").get("acked") == 1)
        assert [g.body for g in receiver.requests()] == [b"new"]


def test_an_endpoint_deleted_half_way_stays_deleted(tmp_path: Path) -> None:
    """A crash after the endpoint's file went but before its groups did: the next start
    deletes the orphaned groups and delivers nothing more."""
    data = str(tmp_path / "data")
    with brook.open(data, delivery_allow_private_networks=True) as b:
        b.topic("t").append(b"x")
        put(b, "hook", url="http://127.0.0.1:9/hook", topics=["t"], enabled=False)
        store = b.endpoint_store

        def crash(*args: Any) -> bool:
            raise RuntimeError("the machine died")

        store.queues.delete_group = crash  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            store.delete("hook")
    with brook.open(data, delivery_allow_private_networks=True) as b:
        assert b.endpoints() == []
        assert [g.group for g in b.queues.groups()] == []


def test_an_endpoint_failing_past_disable_after_ms_is_disabled_and_its_records_wait(
    broker: brook.Broker,
) -> None:
    answers = {"status": 503}
    with Receiver(lambda got: Answer(answers["status"])) as receiver:
        info, _ = put(
            broker,
            "hook",
            url=receiver.url,
            topics=["t"],
            disable_after_ms=60_000,
            backoff={"min_ms": 20, "max_ms": 20},
        )
        assert info.settings.disable_after_ms == 60_000
        broker.topic("t").append(b"waits")
        wait_for(lambda: len(receiver.requests()) >= 2)
        assert broker.endpoint("hook").info().enabled, "failing for less than a minute"
        clock = broker.core.clock
        clock.wall = lambda: time.time() + 61  # failing for over a minute now
        try:
            wait_for(lambda: not broker.endpoint("hook").info().enabled)
            reason = broker.endpoint("hook").info().disabled_reason
            assert "disable_after_ms" in reason and "503" in reason, reason
            assert reason.startswith("no attempt succeeded for 1 min (disable_after_ms)"), reason
            assert stats(broker, "t", "hook").get("dead", 0) == 0, "its record waits"
            tried = len(receiver.requests())
            broker.endpoint("hook").enable()  # still failing: the minute starts afresh
            wait_for(lambda: len(receiver.requests()) >= tried + 2)
            assert broker.endpoint("hook").info().enabled
            answers["status"] = 200
            wait_for(lambda: stats(broker, "t", "hook").get("acked") == 1)
        finally:
            clock.wall = time.time


def test_how_long_an_endpoint_has_failed_is_kept_across_restarts(tmp_path: Path) -> None:
    """A broker restarted every day must still give up on an endpoint dead for days:
    when its failing began is stored once it has failed for a minute, and forgotten
    after a success."""
    data = str(tmp_path / "data")
    ahead = [0.0]
    clock = brook.clock.Clock(wall=lambda: time.time() + ahead[0], monotonic=time.monotonic)
    answers = {"status": 503}
    with Receiver(lambda got: Answer(answers["status"])) as receiver:
        with brook.open(data, delivery_allow_private_networks=True, clock=clock) as b:
            put(
                b,
                "hook",
                url=receiver.url,
                topics=["t"],
                disable_after_ms=600_000,
                backoff={"min_ms": 20, "max_ms": 20},
            )
            b.topic("t").append(b"waits")
            wait_for(lambda: len(receiver.requests()) >= 2)
            assert b.endpoint_store.get("hook").failing_since_ms is None, "a blip writes nothing"
            ahead[0] = 61
            wait_for(lambda: b.endpoint_store.get("hook").failing_since_ms is not None)
            since = b.endpoint_store.get("hook").failing_since_ms
            assert since is not None and since < clock.now_ms() - 60_000
        ahead[0] = 601  # restarted ten minutes after the failing began
        with brook.open(data, delivery_allow_private_networks=True, clock=clock) as b:
            wait_for(lambda: not b.endpoint("hook").info().enabled)
            assert "disable_after_ms" in b.endpoint("hook").info().disabled_reason
            answers["status"] = 200
            b.endpoint("hook").enable()
            assert b.endpoint_store.get("hook").failing_since_ms is None, "enabled: afresh"
            wait_for(lambda: stats(b, "t", "hook").get("acked") == 1)
            assert b.endpoint_store.get("hook").failing_since_ms is None


def test_new_endpoints_expire_records_and_give_up_by_default_and_0_means_never(
    broker: brook.Broker,
) -> None:
    with Receiver() as receiver:
        info = broker.create_endpoint("hook", receiver.url, ["t"])
        assert (info.expire_after_ms, info.disable_after_ms) == (
            limits.endpoint_expire_after_ms_default,
            limits.endpoint_disable_after_ms_default,
        )
        broker.topic("t").append(b"x")
        wait_for(lambda: stats(broker, "t", "hook").get("acked") == 1)
        assert group(broker, "t", "hook").settings.expire_after_ms == info.expire_after_ms
        changed = broker.create_endpoint("hook", expire_after_ms=0, disable_after_ms=0)
        assert (changed.expire_after_ms, changed.disable_after_ms) == (None, None)
        wait_for(lambda: group(broker, "t", "hook").settings.expire_after_ms is None)


FAST = {"min_ms": 10, "max_ms": 20, "jitter": 0}


def test_the_attempt_that_kills_a_record_is_counted_as_dead(broker: brook.Broker) -> None:
    """An alert on dead attempts fires: the last attempt, and one after which the record
    would expire before its next, count as dead (not retry), with why (issue 50)."""
    with Receiver(lambda got: Answer(500)) as receiver:
        put(broker, "hook", url=receiver.url, topics=["t"], max_attempts=3, backoff=FAST)
        broker.topic("t").append(b"doomed")
        wait_for(lambda: stats(broker, "t", "hook").get("dead") == 1)
        hook = broker.endpoint("hook")
        assert hook.stats().attempts == {"retry": 2, "dead": 1}
        *_, last = hook.attempts("t", 0, 0)
        assert (last.state, last.status) == ("dead", 500)
        assert last.reason == "500; attempt 3 was the last (max_attempts 3)"
        # Its next attempt would come due past expire_after_ms: dead now, counted so.
        slow = {"min_ms": 5_000, "max_ms": 5_000, "jitter": 0}
        put(broker, "late", url=receiver.url, topics=["u"], expire_after_ms=2_000, backoff=slow)
        broker.topic("u").append(b"expires")
        wait_for(lambda: stats(broker, "u", "late").get("dead") == 1)
        late = broker.endpoint("late")
        assert late.stats().attempts == {"dead": 1}
        (only,) = late.attempts("u", 0, 0)
        assert only.state == "dead" and "500; no attempt left" in only.reason
        assert "older than expire_after_ms (2 s)" in only.reason, only.reason
        assert len([g for g in receiver.requests() if g.body == b"expires"]) == 1


def test_a_redirect_is_retried_then_dead_saying_where_it_pointed(broker: brook.Broker) -> None:
    """Redirects are not followed (SPEC §7), and a 301 is no reason to lose records at
    once: retried with backoff like a 503, dead after max_attempts with a reason that
    says where the endpoint moved and what to do; pointed there, the records go on."""
    moved = "https://hooks.example.com/v2/brook"
    with (
        Receiver(lambda got: Answer(301, headers={"location": moved})) as old,
        Receiver() as new,
    ):
        put(broker, "hook", url=old.url, topics=["t"], max_attempts=2, backoff=FAST)
        broker.topic("t").append(b"dies")
        wait_for(lambda: stats(broker, "t", "hook").get("dead") == 1)
        assert [g.headers["brook-attempt"] for g in old.requests()] == ["1", "2"]
        attempts = broker.endpoint("hook").attempts("t", 0, 0)
        assert [(a.status, a.state) for a in attempts] == [(301, "retrying"), (301, "dead")]
        said = (
            f"the endpoint answered 301 Moved Permanently to {moved}; Brook does not follow "
            "redirects: point the endpoint at the new address"
        )
        assert all(a.reason.startswith(said) for a in attempts), attempts
        assert broker.endpoint("hook").stats().attempts == {"retry": 1, "dead": 1}
        put(broker, "hook", max_attempts=10, backoff={"min_ms": 200, "max_ms": 200, "jitter": 0})
        broker.topic("t").append(b"moves")
        wait_for(lambda: len(old.requests()) == 3)
        put(broker, "hook", url=new.url)  # what the reason asks
        wait_for(lambda: [g.body for g in new.requests()] == [b"moves"])
        wait_for(lambda: stats(broker, "t", "hook").get("acked") == 1)


def test_a_weak_secret_is_refused_with_a_clear_400(served: Served) -> None:
    """An all-zero secret was taken (issue 50); now a key with too few distinct bytes
    is refused when given, on create and on rotation, saying how to make a good one."""
    zero = "whsec_AAAAAAAAAAAAAAAAAAAAAA=="
    body = {"url": "http://127.0.0.1:9/hook", "topics": ["t"], "enabled": False}
    status, answer = served.request("PUT", "/v1/endpoints/hook", {**body, "secret": zero})
    assert status == 400, answer
    message = answer["error"]["message"]
    assert "too easy to guess: its 16 bytes are all 0x00" in message, message
    assert "openssl rand -base64 32" in message
    status, _ = served.request("PUT", "/v1/endpoints/hook", body)
    assert status == 200
    repeated = "whsec_" + base64.b64encode(b"ab" * 16).decode()
    status, answer = served.request(
        "POST", "/v1/endpoints/hook/rotate-secret", {"secret": repeated}
    )
    assert status == 400 and "only 2 distinct values" in answer["error"]["message"], answer
    good = "whsec_" + base64.b64encode(os.urandom(24)).decode()  # what Svix and others make
    status, answer = served.request("POST", "/v1/endpoints/hook/rotate-secret", {"secret": good})
    assert status == 200, answer


def test_metadata_addresses_are_refused_though_private_networks_are_allowed(
    broker: brook.Broker, tmp_path: Path
) -> None:
    with pytest.raises(BadRequest, match="a cloud metadata address") as refused:
        put(broker, "imds", url="http://169.254.169.254/latest/meta-data/", topics=["t"])
    assert "delivery_allow_networks names it exactly (169.254.169.254/32)" in str(refused.value)
    answers = {"metadata.google.internal": ["169.254.169.254"]}
    with brook.open(
        str(tmp_path / "resolving"),
        delivery_allow_private_networks=True,
        delivery_resolver=lambda host, port: answers[host],
    ) as b:
        put(b, "gcp", url="http://metadata.google.internal/v1/", topics=["t"], max_attempts=1)
        b.topic("t").append(b"x")
        wait_for(lambda: stats(b, "t", "gcp").get("dead") == 1)
        (attempt,) = b.endpoint("gcp").attempts("t", 0, 0)
        assert "169.254.169.254, a cloud metadata address" in attempt.error, attempt


def test_a_metadata_address_named_exactly_may_be_called(tmp_path: Path) -> None:
    with brook.open(
        str(tmp_path / "data"),
        delivery_allow_private_networks=True,
        delivery_allow_networks=["169.254.169.254/32"],
    ) as b:
        info, _ = put(b, "imds", url="http://169.254.169.254/hook", topics=["t"], enabled=False)
        assert info.settings.url == "http://169.254.169.254/hook"
        with pytest.raises(BadRequest, match=r"exactly \(169\.254\.170\.2/32\)"):
            put(b, "ecs", url="http://169.254.170.2/v2/credentials", topics=["t"])


@pytest.mark.parametrize("workers", [0, 1], ids=["loop", "workers"])
def test_allow_networks_narrow_private_networks_on_every_attempt(
    tmp_path: Path, workers: int
) -> None:
    """delivery_allow_networks narrows delivery_allow_private_networks: an endpoint
    outside them is refused when made, and one stored before they were narrowed is
    refused at each attempt (in the delivery loop and in worker processes alike)."""
    data = str(tmp_path / "data")
    with Receiver() as receiver:
        with brook.open(
            data,
            delivery_allow_private_networks=True,
            delivery_allow_networks=["127.0.0.0/8"],
            delivery_workers=workers,
        ) as b:
            put(b, "hook", url=receiver.url, topics=["t"], max_attempts=1)
            with pytest.raises(BadRequest, match="a private address outside delivery_allow"):
                put(b, "lan", url="http://192.168.1.20/hook", topics=["t"])
            b.topic("t").append(b"inside")
            wait_for(lambda: stats(b, "t", "hook").get("acked") == 1)
        with brook.open(
            data,
            delivery_allow_private_networks=True,
            delivery_allow_networks="10.0.0.0/8",
            delivery_workers=workers,
        ) as b:
            b.topic("t").append(b"outside now")
            wait_for(lambda: stats(b, "t", "hook").get("dead") == 1)
            (attempt,) = b.endpoint("hook").attempts("t", 0, 1)
            assert "127.0.0.1, a loopback address outside delivery_allow_networks" in (
                attempt.error
            ), attempt
        assert [g.body for g in receiver.requests()] == [b"inside"]


def test_allow_networks_are_checked_at_start_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="has host bits set") as bad:
        brook.open(
            str(tmp_path / "a"),
            delivery_allow_private_networks=True,
            delivery_allow_networks=["10.0.0.1/8"],
        )
    assert "\n" not in bad.value.message
    with pytest.raises(BadRequest, match="set delivery_allow_private_networks = true"):
        brook.open(str(tmp_path / "b"), delivery_allow_networks="10.0.0.0/8")
    result = CliRunner().invoke(
        main,
        ["serve", "--data", str(tmp_path / "c"), "--delivery-allow-private-networks"],
        env={"BROOK_DELIVERY_ALLOW_NETWORKS": "10.0.0.0/8,nonsense"},
    )
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert "delivery_allow_networks: 'nonsense' is not a network" in line, line


def test_allow_networks_flow_from_brook_toml(tmp_path: Path) -> None:
    config = tmp_path / "brook.toml"
    config.write_text(
        'delivery_allow_private_networks = true\ndelivery_allow_networks = ["127.0.0.1/32"]\n'
    )
    served = Served(tmp_path / "data", config=config)
    try:
        body = {"url": "http://127.0.0.1:9/hook", "topics": ["t"], "enabled": False}
        status, answer = served.request("PUT", "/v1/endpoints/local", body)
        assert status == 200, answer
        body["url"] = "http://10.0.0.1/hook"
        status, answer = served.request("PUT", "/v1/endpoints/lan", body)
        assert status == 400 and "outside delivery_allow_networks" in answer["error"]["message"]
    finally:
        served.close()


def test_a_410_never_makes_a_record_dead_and_nothing_goes_out_after_it(
    broker: brook.Broker,
) -> None:
    """Records sent together to an endpoint that is gone (each answered 410, even on
    its last attempt) all wait for it to be enabled again; none is sent twice meanwhile."""
    gone = True

    def answer(got: Got) -> Answer:
        return Answer(410 if gone else 200)

    with Receiver(answer) as receiver:
        put(broker, "hook", url=receiver.url, topics=["t"], max_attempts=1, max_in_flight=8)
        broker.topic("t").append_many([brook.Record(b"%d" % i) for i in range(8)])
        for i in range(8, 12):
            broker.topic("t").append(b"%d" % i)
        wait_for(lambda: not broker.endpoint_store.get("hook").settings.enabled)
        time.sleep(0.5)
        counts = stats(broker, "t", "hook")
        assert counts["dead"] == 0 and counts["ready"] + counts["retrying"] == 12, counts
        bodies = [g.body for g in receiver.requests()]
        assert len(bodies) == len(set(bodies)), f"sent twice after a 410: {bodies}"
        gone = False
        broker.endpoint("hook").enable()
        wait_for(lambda: stats(broker, "t", "hook").get("acked") == 12)
        assert stats(broker, "t", "hook")["dead"] == 0
