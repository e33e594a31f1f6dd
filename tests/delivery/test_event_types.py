"""Event types: a catalog of what records carry, and endpoints that take only some types
of a topic (SPEC §11), so one topic per customer carries all its types."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import brook
from brook.cli import main
from brook.errors import BadRequest, EventTypeNotFound
from tests.delivery.receivers import Receiver, wait_for
from tests.served import Served

TYPE = "brook.event-type"


@pytest.mark.parametrize("where", ["embedded", "remote"])
def test_the_catalog_holds_described_types(served: Served, tmp_path: Path, where: str) -> None:
    context = (
        brook.connect(f"http://127.0.0.1:{served.port}")
        if where == "remote"
        else brook.open(str(tmp_path / "embedded"))
    )
    with context as b:
        schema = {"type": "object", "required": ["invoice"]}
        made = b.put_event_type("invoice.paid", "An invoice was paid", schema)
        assert (made.name, made.description, made.schema) == (
            "invoice.paid",
            "An invoice was paid",
            schema,
        )
        changed = b.put_event_type("invoice.paid", description="Paid in full")
        assert changed.schema == schema and changed.created_ms == made.created_ms
        b.put_event_type("user.created")
        assert [t.name for t in b.event_types()] == ["invoice.paid", "user.created"]
        assert b.event_type("invoice.paid").description == "Paid in full"
        b.delete_event_type("user.created")
        with pytest.raises(EventTypeNotFound):
            b.event_type("user.created")
        with pytest.raises(EventTypeNotFound):
            b.delete_event_type("user.created")
        for bad in ("has space", "", "x" * 101):
            with pytest.raises(BadRequest):
                b.put_event_type(bad)
    if where == "embedded":  # it is stored: a restart has it
        with brook.open(str(tmp_path / "embedded")) as b:
            assert [t.name for t in b.event_types()] == ["invoice.paid"]


def test_a_schema_must_be_an_object_and_bad_bodies_are_400(served: Served) -> None:
    status, answer = served.request("PUT", "/v1/event-types/a.b", {"schema": [1, 2]})
    assert status == 400, answer
    status, answer = served.request("PUT", "/v1/event-types/a.b", {"describe": "typo"})
    assert status == 400 and "describe" in answer["error"]["message"]
    status, answer = served.request("GET", "/v1/event-types/nothing.here")
    assert status == 404 and answer["error"]["code"] == "event_type_not_found"


def test_endpoints_take_only_their_event_types(served: Served) -> None:
    with (
        Receiver() as invoices,
        Receiver() as everything,
        Receiver() as users,
        brook.connect(f"http://127.0.0.1:{served.port}") as b,
    ):
        # Ordered by key: a customer's events in order across types, passed-over ones too.
        b.create_endpoint(
            "invoices", invoices.url, ["events.c1"], event_types=["invoice.*"], ordering="key"
        )
        b.create_endpoint("everything", everything.url, ["events.c1"], ordering="key")
        b.create_endpoint(
            "users", users.url, ["events.c1"], event_types=["user.created"], ordering="key"
        )
        topic = b.topic("events.c1")
        topic.append(b"paid", key=b"cust", headers={TYPE: b"invoice.paid"})
        topic.append(b"joined", key=b"cust", headers={TYPE: b"user.created"})
        topic.append(b"untyped", key=b"cust")
        topic.append(b"voided", key=b"cust", headers={TYPE: b"invoice.voided"})
        wait_for(lambda: len(everything.requests()) == 4)
        for name in ("invoices", "users"):
            wait_for(lambda name=name: b.endpoint(name).stats().acked == 4)
        time.sleep(0.2)
        assert [g.body for g in invoices.requests()] == [b"paid", b"voided"]
        assert [g.body for g in users.requests()] == [b"joined"]
        assert [g.body for g in everything.requests()] == [
            b"paid",
            b"joined",
            b"untyped",
            b"voided",
        ]
        info = b.endpoint("invoices").info()
        assert info.event_types == ["invoice.*"]
        cleared = b.create_endpoint("invoices", event_types=[])
        assert cleared.event_types is None  # [] takes every record again
        with pytest.raises(BadRequest):
            b.create_endpoint("users", event_types=["has space"])
        with pytest.raises(BadRequest, match=r"brook\.event-type"):
            topic.append(b"x", headers={TYPE: b"not a type"})


def test_what_matches_nothing_yet_is_accepted_with_a_warning(served: Served) -> None:
    url = f"http://127.0.0.1:{served.port}"
    with brook.connect(url) as b:
        b.topic("events.c1").append(b"x")
        info = b.create_endpoint("typo", "http://127.0.0.1:9/x", ["evnets.*", "events.*"])
        assert info.warnings == ["topic pattern 'evnets.*' matches no topic yet"]
        assert b.endpoint("typo").info().warnings == []  # said once, in the answer
        b.put_event_type("invoice.paid")
        info = b.create_endpoint("typo", event_types=["invoice.payed", "invoice.*"])
        assert "event type 'invoice.payed' matches no event type in the catalog" in info.warnings
        result = CliRunner().invoke(
            main,
            [
                "endpoints",
                "create",
                "cli",
                "http://127.0.0.1:9/x",
                "--topic",
                "nothing.*",
                "--url",
                url,
            ],
        )
        assert result.exit_code == 0, result.output
        assert "warning: topic pattern 'nothing.*' matches no topic yet" in result.output


def test_the_cli_keeps_the_catalog(served: Served, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{served.port}"
    schema = tmp_path / "paid.json"
    schema.write_text('{"type": "object"}')
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "event-types",
            "put",
            "invoice.paid",
            "--description",
            "Paid",
            "--schema",
            str(schema),
            "--url",
            url,
        ],
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["event-types", "list", "--url", url])
    assert result.output.splitlines() == ["invoice.paid\tPaid"]
    schema.write_text("{not json")
    result = runner.invoke(
        main, ["event-types", "put", "x.y", "--schema", str(schema), "--url", url]
    )
    assert result.exit_code != 0 and len(result.output.strip().splitlines()) == 1


def test_the_dashboard_lists_the_catalog(served: Served) -> None:
    with brook.connect(f"http://127.0.0.1:{served.port}") as b:
        b.put_event_type("invoice.paid", "An <b>invoice</b> was paid", {"type": "object"})
    status, page = served.request("GET", "/ui/event-types")
    assert status == 200
    assert 'data-event-type="invoice.paid"' in page
    assert "An &lt;b&gt;invoice&lt;/b&gt; was paid" in page  # escaped, never markup
    assert "&#34;type&#34;" in page or "&quot;type&quot;" in page or '"type"' in page
