"""The dashboard in a real browser (Debian's chromium, headless) against a real
`brook serve`: every page loads with no console error and asks nothing of any
other origin; the numbers shown are the API's; a login works; the page refreshes
itself and can be paused."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

import brook
from tests.delivery.receivers import Answer, Receiver, wait_for
from tests.s3server import MotoServer
from tests.served import Served
from tests.ui.browser import Watched, chromium, watched
from tests.ui.keyed import serve_with_keys

ADMIN_KEY = "admin-key-for-the-dashboard-test"
READER_KEY = "reader-key-for-the-dashboard-test"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path / "data")
    yield server
    server.close()


def origin(served: Served) -> str:
    return f"http://127.0.0.1:{served.port}"


def fill(served: Served) -> None:
    with brook.connect(origin(served)) as b:
        b.create_topic("orders", partitions=3)
        b.topic("orders").append_many(
            [brook.Record(f"order {i}".encode(), key=b"k%d" % (i % 7)) for i in range(500)]
        )
        b.topic("images").append(bytes(range(256)) * 8)
        b.topic("events").append(b'{"type": "signup"}', key=b"user-1")


def visit(seen: Watched, url: str) -> None:
    response = seen.page.goto(url)
    assert response is not None and response.status == 200, url
    seen.page.wait_for_load_state("networkidle")


def test_every_page_loads_cleanly_and_stays_on_the_broker(browser: Browser, served: Served) -> None:
    fill(served)
    seen = watched(browser)
    base = origin(served)
    for path in (
        "/ui",
        "/ui/topics/orders",
        "/ui/topics/orders?partition=2",
        "/ui/topics/images?form=base64",
        "/ui/topics/events?key=user-1",
        "/ui/groups",
        "/ui/queues",
        "/ui/endpoints",
        "/ui/timers",
        "/ui/storage",
        "/ui/workers",
    ):
        visit(seen, base + path)
    assert seen.errors == []
    assert seen.outside(base) == []
    assert any(u.endswith("/ui/static/ui.css") for u in seen.requests)
    assert any(u.endswith("/ui/static/refresh.js") for u in seen.requests)


def test_the_numbers_shown_are_the_apis(browser: Browser, served: Served) -> None:
    fill(served)
    seen = watched(browser)
    base = origin(served)
    visit(seen, base + "/ui")
    _, listed = served.request("GET", "/v1/topics")
    for topic in listed["topics"]:
        row = seen.page.locator(f'tr[data-topic="{topic["name"]}"]')
        records = sum(topic["end_offsets"].values())
        expect(row.locator('[data-col="records"]')).to_have_text(f"{records:,}")
        expect(row.locator('[data-col="partitions"]')).to_have_text(str(topic["partitions"]))
    visit(seen, base + "/ui/topics/orders")
    _, detail = served.request("GET", "/v1/topics/orders")
    for partition, end in detail["end_offsets"].items():
        row = seen.page.locator(f'tr[data-partition="{partition}"]')
        expect(row.locator('[data-col="end"]')).to_have_text(f"{end:,}")
        start = detail["start_offsets"][partition]
        expect(row.locator('[data-col="start"]')).to_have_text(f"{start:,}")
    # The record browser pages back by offset through the whole partition.
    ends = {int(p): e for p, e in detail["end_offsets"].items()}
    visit(seen, base + "/ui/topics/orders?partition=0")
    offsets: list[int] = []
    while True:
        offsets += [
            int(o)
            for o in seen.page.locator("tr[data-offset]").evaluate_all(
                "rows => rows.map(r => r.dataset.offset)"
            )
        ]
        older = seen.page.locator("a[rel=next]")
        if older.count() == 0:
            break
        older.click()
        seen.page.wait_for_load_state("networkidle")
    assert offsets == list(range(ends[0] - 1, -1, -1))
    assert seen.errors == []


def test_the_page_refreshes_itself_and_can_be_paused(browser: Browser, served: Served) -> None:
    fill(served)
    seen = watched(browser)
    visit(seen, origin(served) + "/ui")
    seen.page.select_option("[data-refresh-interval]", "2")
    cell = seen.page.locator('tr[data-topic="events"] [data-col="records"]')
    expect(cell).to_have_text("1")
    with brook.connect(origin(served)) as b:
        b.topic("events").append(b"second")
    expect(cell).to_have_text("2", timeout=10_000)
    seen.page.click("[data-refresh-pause]")
    expect(seen.page.locator("[data-refresh-pause]")).to_have_text("Resume")
    cell = seen.page.locator('tr[data-topic="events"] [data-col="records"]')
    with brook.connect(origin(served)) as b:
        b.topic("events").append(b"third")
    seen.page.wait_for_timeout(3_000)  # longer than the 2 s interval
    expect(cell).to_have_text("2")  # paused: the page was not swapped
    assert seen.errors == []


def test_a_login_with_a_key_then_out(browser: Browser, tmp_path: Path) -> None:
    server = serve_with_keys(tmp_path, ADMIN_KEY, READER_KEY, ["orders*"], "viewer")
    try:
        base = origin(server)
        with brook.connect(base, api_key=ADMIN_KEY) as b:
            b.topic("orders").append(b"one")
            b.topic("secret-stuff").append(b"two")
        seen = watched(browser)
        seen.page.goto(base + "/ui/topics/orders")
        assert "/ui/login" in seen.page.url  # asked to log in, and sent back after
        seen.page.fill("input[name=key]", "not a key")
        seen.page.click("button[type=submit]")
        expect(seen.page.locator(".error")).to_have_text("That key is not valid.")
        seen.page.fill("input[name=key]", READER_KEY)
        seen.page.click("button[type=submit]")
        expect(seen.page.locator("h1")).to_contain_text("orders")
        assert seen.page.url == base + "/ui/topics/orders"
        visit(seen, base + "/ui")
        expect(seen.page.locator(".who")).to_have_text("viewer (read only)")
        assert seen.page.locator('tr[data-topic="secret-stuff"]').count() == 0
        cookies = {c["name"]: c for c in seen.page.context.cookies()}
        session = cookies["brook_session"]
        assert session["httpOnly"] and session["sameSite"] == "Strict"
        assert READER_KEY not in session["value"]
        assert all(READER_KEY not in u for u in seen.requests)
        seen.page.click(".logout button")
        assert "/ui/login" in seen.page.url
        seen.page.goto(base + "/ui")
        assert "/ui/login" in seen.page.url  # logged out for good
        assert seen.errors == [] or all("401" in e for e in seen.errors)
        assert all(READER_KEY not in line for line in server.log)
    finally:
        server.close()


OUTER_FRAME = "/srv/app/billing.py:40 in settle"
TASK_FRAME = "/srv/app/orders.py:12 in charge"
"""Frames of a task's error summary, outermost first: its group names the innermost."""


def test_dead_records_redriven_by_error_and_by_hand(browser: Browser, served: Served) -> None:
    base = origin(served)
    with brook.connect(base) as b:
        b.topic("jobs").append_many(
            [brook.Record(b"job %d" % i, key=b"customer-%d" % (i % 3)) for i in range(40)]
        )
        queue = b.queue("jobs", "workers", max_attempts=1)
        jobs = queue.lease(40, timeout=1)
        for n, job in enumerate(jobs[:25]):  # as a task's worker leaves them
            reason = f"TimeoutError: the bank took {n} s\n  {OUTER_FRAME}\n  {TASK_FRAME}"
            queue.nack(job, reason=reason)
        for n, job in enumerate(jobs[25:]):  # the ids differ: one group all the same
            queue.nack(job, reason=f"invalid card number for order {1000 + n}")
        seen = watched(browser)
        visit(seen, base + "/ui/queues")
        row = seen.page.locator('tr[data-queue="jobs/workers"]')
        for state, count in queue.stats().items():
            if state != "oldest_ready_age_ms":
                expect(row.locator(f'[data-col="{state}"]')).to_have_text(f"{count:,}")
        row.locator("a").click()
        errors = seen.page.locator("table.errors")
        # Grouped by the exception and the task's frame, or the reason less its ids.
        timeouts = errors.locator('tr[data-error="TimeoutError at orders.py:12 in charge"]')
        expect(timeouts.locator("a").first).to_have_text("TimeoutError at orders.py:12 in charge")
        expect(timeouts.locator('[data-col="count"]')).to_have_text("25")
        cards = errors.locator('tr[data-error="invalid card number for order N"]')
        expect(cards.locator('[data-col="count"]')).to_have_text("15")
        expect(cards.locator('[data-col="example"]')).to_have_text(
            "invalid card number for order 1000"
        )
        expect(errors.locator("tbody tr")).to_have_count(2)
        # All of one error: a dry run first, then the confirmation.
        cards.locator("a.action").click()
        expect(seen.page.locator("[data-dry-run]")).to_contain_text("15 dead records")
        assert queue.stats()["dead"] == 40  # the dry run changed nothing
        seen.page.click("[data-confirm]")
        expect(seen.page.locator(".notice")).to_contain_text("15 records redriven")
        stats = queue.stats()
        assert (stats["ready"], stats["dead"]) == (15, 25)
        expect(seen.page.locator('table.counts [data-col="dead"]')).to_have_text("25")
        # Chosen by hand: two of the other error's records.
        seen.page.locator("table.dead input[type=checkbox]").nth(0).check()
        seen.page.locator("table.dead input[type=checkbox]").nth(1).check()
        seen.page.click("[data-redrive-selected]")
        expect(seen.page.locator(".notice")).to_contain_text("2 records redriven")
        stats = queue.stats()
        assert (stats["ready"], stats["dead"]) == (17, 23)
        # What died: each dead record's key and value, beside its place.
        first = seen.page.locator("table.dead tbody tr").first
        place = first.get_attribute("data-record") or ""
        offset = int(place.split(".")[1])
        expect(first.locator('[data-col="key"]')).to_have_text(f"customer-{offset % 3}")
        expect(first.locator('[data-col="value"]')).to_have_text(f"job {offset}")
        # Each record's own message; one whole error of the group, frames and all.
        expect(first.locator('[data-col="error"]')).to_contain_text("TimeoutError: the bank took")
        example = seen.page.locator("[data-example]")
        expect(example).to_contain_text("TimeoutError: the bank took")
        expect(example).to_contain_text(f"  {OUTER_FRAME}\n  {TASK_FRAME}")
        # Settings for people: no Python reprs.
        expect(seen.page.locator('[data-setting="backoff"]')).to_have_text(
            "min_ms 1000, factor 2, max_ms 300000, jitter 0.5"
        )
        expect(seen.page.locator('[data-setting="concurrency_per_key"]')).to_have_text("none")
        # A dead record's trace shows how it died.
        seen.page.locator("table.dead a", has_text="trace").first.click()
        expect(seen.page.locator("table.trace")).to_contain_text("TimeoutError: the bank took")
        assert seen.errors == []
        assert seen.outside(base) == []


def test_an_endpoint_seen_tested_disabled_enabled_redriven_and_replayed(
    browser: Browser, tmp_path: Path
) -> None:
    config = tmp_path / "brook.toml"
    config.write_text("delivery_allow_private_networks = true\n")
    server = Served(tmp_path / "data", config=config)
    refused = {b"poison"}
    try:
        base = origin(server)
        with (
            Receiver(lambda got: Answer(422 if got.body in refused else 200)) as receiver,
            brook.connect(base) as b,
        ):
            b.create_endpoint("billing", receiver.url, ["invoices"])
            b.topic("invoices").append_many(
                [brook.Record(b"invoice 1"), brook.Record(b"poison"), brook.Record(b"invoice 2")]
            )
            handle = b.endpoint("billing")
            wait_for(lambda: handle.stats().acked == 2 and handle.stats().dead == 1)
            seen = watched(browser)
            visit(seen, base + "/ui/endpoints")
            row = seen.page.locator('tr[data-endpoint="billing"]')
            expect(row.locator('[data-col="dead"]')).to_have_text("1")
            expect(row.locator('[data-col="ready"]')).to_have_text("0")
            row.locator("a").first.click()
            expect(seen.page.locator('[data-fact="records"]')).to_contain_text(
                "1 dead, 2 delivered"
            )
            expect(seen.page.locator("table.recent")).to_contain_text("422")
            seen.page.click('[data-action="test"]')
            expect(seen.page.locator(".notice")).to_contain_text("test request answered 200")
            seen.page.click('[data-action="disable"]')
            expect(seen.page.locator('[data-fact="state"]')).to_contain_text("disabled")
            assert handle.info().enabled is False
            b.topic("invoices").append(b"invoice 3")  # waits while disabled
            seen.page.click('[data-action="enable"]')
            expect(seen.page.locator('[data-fact="state"]')).to_contain_text("enabled")
            wait_for(lambda: handle.stats().acked == 3)
            refused.clear()
            seen.page.click('[data-action="redrive"]')
            expect(seen.page.locator(".notice")).to_contain_text("1 dead records redriven")
            wait_for(lambda: handle.stats().acked == 4 and handle.stats().dead == 0)
            assert sorted(g.body for g in receiver.requests() if b"brook.test" not in g.body) == [
                b"invoice 1",
                b"invoice 2",
                b"invoice 3",
                b"poison",
                b"poison",
            ]
            seen.page.fill('[data-field="hours"]', "2")
            seen.page.click('[data-action="replay"]')
            expect(seen.page.locator(".notice")).to_contain_text(
                "4 records of the last 2 hours to be sent again"
            )
            wait_for(lambda: handle.stats().acked == 8)
            assert seen.errors == []
            assert seen.outside(base) == []
    finally:
        server.close()


def test_timers_by_day_looked_up_and_cancelled(browser: Browser, served: Served) -> None:
    base = origin(served)
    day = 24 * 60 * 60 * 1000
    with brook.connect(base) as b:
        now = int(time.time() * 1000)
        soon = b.schedule("reminders", b"soon", delay_ms=300)
        ids = [b.schedule("reminders", b"tomorrow %d" % i, at=now + day + i) for i in range(3)]
        wait_for(lambda: b.timer(soon) is not None and b.timer(soon).state == "fired")
        seen = watched(browser)
        visit(seen, base + "/ui/timers")
        expect(seen.page.locator('[data-fact="pending"]')).to_have_text("3")
        expect(seen.page.locator('[data-fact="fired"]')).to_have_text("1")
        tomorrow = time.strftime("%Y-%m-%d", time.gmtime((now + day) / 1000))
        expect(seen.page.locator(f'tr[data-day="{tomorrow}"] [data-col="count"]')).to_have_text("3")
        seen.page.fill("input[name=id]", soon)
        seen.page.click("form[data-lookup] button")
        expect(seen.page.locator('[data-fact="state"]')).to_have_text("fired")
        assert seen.page.locator("[data-cancel]").count() == 0  # fired: nothing to cancel
        seen.page.fill("input[name=id]", ids[0])
        seen.page.click("form[data-lookup] button")
        expect(seen.page.locator('[data-fact="state"]')).to_have_text("pending")
        seen.page.click("[data-cancel]")
        expect(seen.page.locator(".notice")).to_contain_text("cancelled")
        expect(seen.page.locator('[data-fact="state"]')).to_have_text("cancelled")
        assert b.timer(ids[0]).state == "cancelled"
        expect(seen.page.locator('[data-fact="pending"]')).to_have_text("2")
        seen.page.fill("input[name=id]", "no-such-timer")
        seen.page.click("form[data-lookup] button")
        expect(seen.page.locator("[data-timer-missing]")).to_be_visible()
        assert seen.errors == []
        assert seen.outside(base) == []


def test_pending_timers_are_listed_by_page_and_topic(browser: Browser, served: Served) -> None:
    base = origin(served)
    with brook.connect(base) as b:
        now = int(time.time() * 1000)
        specs = [
            brook.TimerSpec("billing" if i % 4 == 0 else "reminders", b"x", at=now + 3_600_000 + i)
            for i in range(70)
        ]
        ids = b.schedule_many(specs)
        seen = watched(browser)
        visit(seen, base + "/ui/timers")
        rows = seen.page.locator("[data-timer-row]")
        expect(rows).to_have_count(50)
        assert rows.first.get_attribute("data-timer-row") == ids[0], "earliest due first"
        seen.page.click("[data-next]")
        expect(rows).to_have_count(20)
        assert rows.last.get_attribute("data-timer-row") == ids[-1]
        expect(seen.page.locator("[data-next]")).to_have_count(0)
        seen.page.fill("form[data-list] input[name=topic]", "billing")
        seen.page.click("form[data-list] button")
        expect(rows).to_have_count(18)
        expect(rows.locator("td:nth-child(2)")).to_have_text(["billing"] * 18)
        assert seen.errors == []
        assert seen.outside(base) == []


def test_stream_groups_show_the_apis_positions_and_lag_after_a_restart(
    browser: Browser, tmp_path: Path
) -> None:
    first = Served(tmp_path / "data")
    try:
        with brook.connect(origin(first)) as b:
            b.create_topic("clicks", partitions=2)
            b.topic("clicks").append_many([brook.Record(b"c%d" % i) for i in range(100)])
            reader = b.consumer("clicks", "analytics")
            taken = reader.poll(max_records=30, timeout=1)
            assert taken
            reader.commit()
    finally:
        first.stop()
    served = Served(tmp_path / "data")  # a new broker: the group is known from storage only
    try:
        seen = watched(browser)
        visit(seen, origin(served) + "/ui/groups")
        _, group = served.request("GET", "/v1/topics/clicks/groups/analytics")
        for partition, lag in group["lag"].items():
            row = seen.page.locator(
                f'tr[data-group="clicks/analytics"][data-partition="{partition}"]'
            )
            expect(row.locator('[data-col="lag"]')).to_have_text(f"{lag:,}")
            committed = group["committed"][partition]
            expect(row.locator('[data-col="committed"]')).to_have_text(f"{committed:,}")
        assert sum(group["lag"].values()) == 100 - len(taken)
        assert seen.errors == []
    finally:
        served.close()


def test_the_storage_page_counts_the_object_stores_requests_and_prices_them(
    browser: Browser, moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    served = Served(
        tmp_path / "unused",
        "--storage",
        url,
        "--endpoint-url",
        moto.endpoint,
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    try:
        base = origin(served)
        with brook.connect(base) as b:
            for i in range(20):
                b.topic("events").append(b"event %d" % i)
        seen = watched(browser)
        visit(seen, base + "/ui/storage")
        _, metrics = served.request("GET", "/metrics")
        for kind in ("put", "get", "list"):
            found = re.search(rf'brook_object_requests_total{{kind="{kind}"}} (\d+)', metrics)
            assert found is not None
            shown = seen.page.locator(f'tr[data-kind="{kind}"] [data-col="count"]').inner_text()
            # The page was made just before /metrics was read: a background request may
            # have come between the two, never one fewer.
            assert 0 <= int(found.group(1)) - int(shown.replace(",", "")) <= 2, kind
        total = float(seen.page.locator('[data-col="total"]').inner_text())
        assert total > 0
        expect(seen.page.locator('[data-fact="where"]')).to_contain_text(url)
        assert seen.errors == []
        assert seen.outside(base) == []
        visit(seen, base + "/ui")  # and the other pages on S3
        assert seen.errors == []
    finally:
        served.close()


def test_periodic_schedules_show_their_last_and_next_run(browser: Browser, served: Served) -> None:
    base = origin(served)
    with brook.connect(base) as b:
        b.put_schedule("beat", "beats", b"x", every_ms=1_000)
        b.put_schedule("morning", "digests", cron="0 9 * * *", tz="Europe/Berlin")
        b.pause_schedule("morning")
        wait_for(lambda: b.get_schedule("beat").fired >= 1)
        beat = b.get_schedule("beat")
        seen = watched(browser)
        visit(seen, base + "/ui/timers")
        row = seen.page.locator('tr[data-schedule="beat"]')
        expect(row.locator('[data-col="state"]')).to_have_text("active")
        expect(row.locator('[data-col="last"]')).not_to_have_text("\u2013")
        expect(row.locator('[data-col="next"]')).not_to_have_text("\u2013")
        assert beat.last_slot_ms is not None
        paused = seen.page.locator('tr[data-schedule="morning"]')
        expect(paused.locator('[data-col="state"]')).to_have_text("paused")
        expect(paused.locator('[data-col="when"]')).to_contain_text("0 9 * * *")
        expect(paused.locator('[data-col="next"]')).to_have_text("\u2013")
        assert seen.errors == []
