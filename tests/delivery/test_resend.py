"""One message sent once more, found by its webhook-id: Brook's own, or the sender's
event id (SPEC §7, issue 50: `replay` from one offset re-sent eleven records, and a
`redrive` of a delivered record answered 0)."""

from __future__ import annotations

import http.client
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from standardwebhooks.webhooks import Webhook

import brook
from brook.cli import main
from brook.errors import BadRequest, MessageNotFound
from tests.delivery.receivers import Answer, Got, Receiver, wait_for
from tests.served import Served
from tests.ui.test_http import get, post

EVENT_ID = "brook.event-id"


def _bodies(hook: Receiver) -> list[bytes]:
    return [g.body for g in hook.requests()]


@pytest.mark.parametrize("where", ["embedded", "remote"])
def test_one_delivered_message_goes_once_more_and_no_other(
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
            b.topic("orders").append_many([brook.Record(b"%d" % i) for i in range(12)])
            wait_for(lambda: len(hook.requests()) == 12 and len(other.requests()) == 12)
            wait_for(lambda: b.endpoint("hook").stats().acked == 12)
            first = {g.body: g.headers["webhook-id"] for g in hook.requests()}

            done = b.endpoint("hook").resend(first[b"3"])
            assert (done.state, done.topic, done.partition, done.offset) == (
                "resent",
                "orders",
                0,
                3,
            )
            wait_for(lambda: len(hook.requests()) == 13)
            again = hook.requests()[12]
            assert again.body == b"3" and again.headers["webhook-id"] == first[b"3"]
            assert made.secret is not None
            Webhook(made.secret).verify(again.body, again.headers, json_parse=False)
            wait_for(lambda: b.endpoint("hook").stats().acked == 13)
            time.sleep(0.3)
            assert len(hook.requests()) == 13, "that message alone, once"
            assert len(other.requests()) == 12, "another endpoint is not touched"

            with pytest.raises(MessageNotFound, match="holds no record at partition 0, offset 99"):
                b.endpoint("hook").resend("orders:0:99")
            with pytest.raises(MessageNotFound, match="delivers nothing from topic elsewhere"):
                b.endpoint("hook").resend("elsewhere:0:1")
            with pytest.raises(MessageNotFound, match="carries this event id"):
                b.endpoint("hook").resend("evt_never_sent")
            with pytest.raises(BadRequest):
                b.endpoint("hook").resend("not an id, spaces")


def test_a_dead_message_is_redriven_and_one_on_its_way_is_not_sent_twice(
    tmp_path: Path,
) -> None:
    answers = iter([Answer(400)])

    with (
        Receiver(lambda got: next(answers, Answer(200))) as hook,
        brook.open(str(tmp_path), delivery_allow_private_networks=True) as b,
    ):
        b.create_endpoint("hook", hook.url, ["orders"], max_attempts=1)
        b.topic("orders").append(b"refused once")
        wait_for(lambda: b.endpoint("hook").stats().dead == 1)
        done = b.endpoint("hook").resend("orders:0:0")
        assert done.state == "redriven"
        wait_for(lambda: b.endpoint("hook").stats().acked == 1)
        assert _bodies(hook) == [b"refused once", b"refused once"]

        b.endpoint("hook").disable()
        b.topic("orders").append(b"waiting")
        assert b.endpoint("hook").resend("orders:0:1").state == "pending"
        b.endpoint("hook").enable()
        wait_for(lambda: b.endpoint("hook").stats().acked == 2)
        time.sleep(0.3)
        assert _bodies(hook).count(b"waiting") == 1


def test_the_senders_event_id_is_the_webhook_id_and_finds_the_message(
    served: Served,
) -> None:
    with Receiver() as hook, brook.connect(f"http://127.0.0.1:{served.port}") as b:
        b.create_endpoint("hook", hook.url, ["invoices.*"])
        topic = b.topic("invoices.c1")
        topic.append(b"plain")
        topic.append(b"paid", headers={EVENT_ID: b"evt_01HZX9"})
        wait_for(lambda: len(hook.requests()) == 2)
        by_body: dict[bytes, Got] = {g.body: g for g in hook.requests()}
        assert by_body[b"paid"].headers["webhook-id"] == "evt_01HZX9"
        assert by_body[b"plain"].headers["webhook-id"] == "invoices.c1:0:0"

        wait_for(lambda: b.endpoint("hook").stats().acked == 2)
        found = b.message_attempts("evt_01HZX9")
        assert [m.endpoint for m in found] == ["hook"]
        assert [a.state for a in found[0].attempts] == ["acked"]
        done = b.endpoint("hook").resend("evt_01HZX9")
        assert (done.state, done.offset) == ("resent", 1)
        wait_for(lambda: len(hook.requests()) == 3)
        assert hook.requests()[2].headers["webhook-id"] == "evt_01HZX9"

        status, answer = served.request(
            "POST", "/v1/endpoints/hook/resend", {"webhook_id": "evt_never_sent"}
        )
        assert status == 404 and answer["error"]["code"] == "message_not_found"
        status, answer = served.request("POST", "/v1/endpoints/hook/resend", {})
        assert status == 400


def test_a_bad_event_id_is_refused_at_the_append(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        for bad in (b"has space", b"", b"x" * 300, "é".encode()):
            with pytest.raises(BadRequest, match=EVENT_ID):
                b.topic("t").append(b"v", headers={EVENT_ID: bad})
        assert b.topic("t").append(b"v", headers={EVENT_ID: b"order-42:v=1"}).offset == 0


def test_the_cli_resends_and_says_what_it_did(served: Served) -> None:
    with Receiver() as hook, brook.connect(f"http://127.0.0.1:{served.port}") as b:
        b.create_endpoint("hook", hook.url, ["orders"])
        b.topic("orders").append(b"once")
        wait_for(lambda: b.endpoint("hook").stats().acked == 1)
        url = f"http://127.0.0.1:{served.port}"
        result = CliRunner().invoke(
            main, ["endpoints", "resend", "hook", "orders:0:0", "--url", url]
        )
        assert result.exit_code == 0, result.output
        assert "sent again: orders:0:0" in result.output
        wait_for(lambda: len(hook.requests()) == 2)
        result = CliRunner().invoke(
            main, ["endpoints", "resend", "hook", "orders:0:7", "--url", url]
        )
        assert result.exit_code != 0
        assert len(result.output.strip().splitlines()) == 1 and "orders:0:7" in result.output


def test_the_dashboard_resends_from_an_attempts_row(served: Served) -> None:
    with Receiver() as hook, brook.connect(f"http://127.0.0.1:{served.port}") as b:
        b.create_endpoint("hook", hook.url, ["orders"])
        b.topic("orders").append(b"once")
        wait_for(lambda: b.endpoint("hook").stats().acked == 1)
        first = get(served, "/ui/endpoints/hook")
        cookie = (first.getheader("set-cookie") or "").split(";")[0]
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
        connection.request("GET", "/ui/endpoints/hook", headers={"cookie": cookie})
        page = connection.getresponse().read().decode()
        connection.close()
        form = re.search(
            r'action="([^"]+/resend)".*?name="csrf" value="([^"]+)".*?'
            r'name="webhook_id" value="([^"]+)"',
            page,
            re.S,
        )
        assert form is not None, "a resend button on the attempt's row"
        action, token, webhook_id = form.groups()
        assert webhook_id == "orders:0:0"
        status, headers, _ = post(served, action, {"csrf": token, "webhook_id": webhook_id}, cookie)
        assert status == 303 and "sent+once+more" in headers["location"]
        wait_for(lambda: len(hook.requests()) == 2)
