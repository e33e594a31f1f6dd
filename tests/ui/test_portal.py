"""A customer's portal (SPEC §11): a short-lived signed link that shows one tenant its own
endpoints in the dashboard, lets it act on them, and nothing else; opened in a real
browser (Debian's chromium, headless) against a `brook serve` that has API keys."""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from playwright.sync_api import Browser

import brook
from brook.cli import main
from brook.config import key_stanza
from tests.delivery.receivers import Answer, Receiver, wait_for
from tests.served import Served
from tests.ui.browser import chromium, watched

OPERATOR = "key-of-the-operator-in-the-portal-test"
TENANT_KEY = "key-of-tenant-c1-in-the-portal-test"
HEADER_SECRET = "Bearer token-of-tenant-c2"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    config = tmp_path / "brook.toml"
    config.write_text(
        "delivery_allow_private_networks = true\n"
        + key_stanza("ops", OPERATOR, ["admin", "produce", "consume"], ["*"])
        + key_stanza("c1-admin", TENANT_KEY, ["admin"], ["events.c1.*"], "c1")
    )
    server = Served(tmp_path / "data", config=config)
    yield server
    server.close()


def _origin(served: Served) -> str:
    return f"http://127.0.0.1:{served.port}"


def _as(key: str) -> dict[str, str | None]:
    return {"authorization": f"Bearer {key}"}


def test_a_portal_shows_one_tenant_its_endpoints_and_lets_it_act(
    browser: Browser, served: Served
) -> None:
    with (
        Receiver(lambda got: Answer(500 if got.body == b"fails" else 200)) as hook,
        brook.connect(_origin(served), api_key=OPERATOR) as b,
    ):
        b.create_endpoint("c1-hook", hook.url, ["events.c1.*"], tenant="c1", max_attempts=1)
        b.create_endpoint(
            "c2-hook",
            hook.url,
            ["events.c2.*"],
            tenant="c2",
            headers={"Authorization": HEADER_SECRET},
        )
        b.topic("events.c1.invoice").append(b"paid")
        b.topic("events.c1.invoice").append(b"fails")
        b.topic("events.c2.invoice").append(b"other tenant")
        wait_for(lambda: b.endpoint("c1-hook").stats().dead == 1)
        wait_for(lambda: b.endpoint("c1-hook").stats().acked == 1)

        made = b.portal_link("c1", ttl_s=600)
        assert made.path.startswith("/ui/portal/c1.")
        seen = watched(browser)
        page = seen.page
        response = page.goto(_origin(served) + made.path)
        assert response is not None and response.status == 200
        assert page.url.endswith("/ui/endpoints")
        listed = page.content()
        assert "c1-hook" in listed
        assert "c2-hook" not in listed and HEADER_SECRET not in listed
        assert "Overview" not in page.inner_text("nav")

        page.click("text=c1-hook")
        assert "/ui/endpoints/c1-hook" in page.url
        page.click("button[data-action=redrive]")  # its dead record goes again
        assert page.locator(".notice").inner_text().startswith("1 dead records redriven")
        page.click("button[data-action=test]")
        assert "test request answered 200" in page.locator(".notice").inner_text()
        page.click("button[data-action=resend] >> nth=0")  # the newest attempt's message
        assert re.match(r"events\.c1\.invoice:0:\d .*sent", page.locator(".notice").inner_text())
        page.click("button[data-action=rotate]")
        secret = page.locator("[data-secret]").inner_text()
        assert secret.startswith("whsec_")
        page.goto(_origin(served) + "/ui/endpoints/c1-hook")
        page.click("button[data-action=disable]")
        assert b.endpoint("c1-hook").info().enabled is False
        assert seen.errors == [] and seen.outside(_origin(served)) == []

        # Nothing of another tenant, and no page of the broker's, is reachable from it.
        for path in (
            "/ui/endpoints/c2-hook",
            "/ui",
            "/ui/topics/events.c2.invoice",
            "/ui/queues",
            "/ui/storage",
            "/ui/timers",
        ):
            response = page.goto(_origin(served) + path)
            assert response is not None and response.status == 403, path
            assert HEADER_SECRET not in page.content()
        page.goto(_origin(served) + "/ui/endpoints/c1-hook")
        token = page.locator("input[name=csrf] >> nth=0").get_attribute("value")
        assert token
        response = page.request.post(
            _origin(served) + "/ui/endpoints/c2-hook/disable", form={"csrf": token}
        )
        assert response.status == 403 and "tenant" in response.text()
        assert b.endpoint("c2-hook").info().enabled is True


def test_a_link_forged_altered_or_expired_opens_nothing(served: Served) -> None:
    with brook.connect(_origin(served), api_key=OPERATOR) as b:
        made = b.portal_link("c1", ttl_s=60)
    tenant, until, signature = made.path.removeprefix("/ui/portal/").rsplit(".", 2)
    for forged in (
        f"c2.{until}.{signature}",  # another tenant
        f"{tenant}.{int(until) + 10**9}.{signature}",  # longer
        f"{tenant}.{until}.{'A' * len(signature)}",  # made up
        "c1.1.xyz",  # long expired
    ):
        status, page = served.request("GET", f"/ui/portal/{forged}")
        assert status == 403, forged
        assert "ask for a new one" in page


def test_who_may_make_a_link(served: Served) -> None:
    status, answer = served.request("POST", "/v1/portal", {"tenant": "c1"}, _as(TENANT_KEY))
    assert status == 200, answer
    assert answer["url"].startswith(f"http://127.0.0.1:{served.port}/ui/portal/c1.")
    status, answer = served.request("POST", "/v1/portal", {"tenant": "c2"}, _as(TENANT_KEY))
    assert status == 403
    status, answer = served.request("POST", "/v1/portal", {"tenant": "__x"}, _as(OPERATOR))
    assert status == 400
    status, answer = served.request(
        "POST", "/v1/portal", {"tenant": "c1", "ttl_s": 10**9}, _as(OPERATOR)
    )
    assert status == 400
    result = CliRunner().invoke(
        main, ["portal", "c1", "--url", _origin(served), "--api-key", OPERATOR]
    )
    assert result.exit_code == 0, result.output
    assert re.search(rf"http://127\.0\.0\.1:{served.port}/ui/portal/c1\.\d+\.\S+", result.output)


def test_a_link_outlives_a_restart(tmp_path: Path) -> None:
    with brook.open(str(tmp_path / "data")) as b:
        made = b.portal_link("c1", ttl_s=600)
    served = Served(tmp_path / "data")
    try:
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
        connection.request("GET", made.path)
        response = connection.getresponse()
        response.read()
        connection.close()
        assert response.status == 303
        assert response.getheader("location") == "/ui/endpoints"
        assert "brook_session=portal:c1." in (response.getheader("set-cookie") or "")
    finally:
        served.close()
