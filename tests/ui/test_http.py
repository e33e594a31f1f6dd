"""The dashboard over plain HTTP against a real `brook serve`: what a browser is
told (security headers, cookies), what a forged or malformed request gets (a 4xx
page, never a 500, never a change), and that keys stay out of URLs and logs."""

from __future__ import annotations

import datetime
import http.client
import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

import brook
from brook.config import key_stanza
from brook.server.ui.session import Signer
from tests.served import Served
from tests.ui.keyed import serve_with_keys

KEY = "the-admin-key-of-the-ui-http-test"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path / "data")
    yield server
    server.close()


def get(
    served: Served, path: str, headers: dict[str, str] | None = None
) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.request("GET", path, headers=headers or {})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def post(
    served: Served, path: str, fields: dict[str, str], cookie: str = ""
) -> tuple[int, dict[str, str], str]:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    headers = {"content-type": "application/x-www-form-urlencoded"}
    if cookie:
        headers["cookie"] = cookie
    connection.request("POST", path, urllib.parse.urlencode(fields), headers)
    response = connection.getresponse()
    body = response.read().decode()
    answer = (response.status, {k.lower(): v for k, v in response.getheaders()}, body)
    connection.close()
    return answer


def test_pages_carry_a_strict_policy_and_a_csrf_cookie(served: Served) -> None:
    response = get(served, "/ui")
    assert response.status == 200
    assert response.getheader("content-type") == "text/html; charset=utf-8"
    policy = response.getheader("content-security-policy") or ""
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert response.getheader("cache-control") == "no-store"
    cookie = response.getheader("set-cookie") or ""
    assert cookie.startswith("brook_csrf=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/ui/topics/orders?partition=7", 400),
        ("/ui/topics/orders?partition=-1", 400),
        ("/ui/topics/orders?before=1e9", 400),
        ("/ui/topics/orders?before=99999999999999999999999", 400),
        ("/ui/topics/orders?form=rot13", 400),
        ("/ui/topics/nope", 404),
        ("/ui/topics/%00", 400),
        ("/ui/static/../../etc/passwd", 404),
        ("/ui/static/ui.exe", 404),
        ("/ui/whatever", 404),
    ],
)
def test_bad_addresses_are_4xx_pages(served: Served, path: str, status: int) -> None:
    with brook.connect(f"http://127.0.0.1:{served.port}") as b:
        b.create_topic("orders", partitions=2)
    response = get(served, path)
    assert response.status == status, path
    assert response.getheader("content-type") == "text/html; charset=utf-8"


def test_a_post_without_the_right_csrf_token_changes_nothing(served: Served) -> None:
    csrf_cookie = "brook_csrf=" + Signer.new_csrf_cookie()
    for fields in ({}, {"csrf": ""}, {"csrf": "forged"}):
        status, _, body = post(served, "/ui/logout", fields, csrf_cookie)
        assert status == 403 and "CSRF" in body
    status, _, _ = post(served, "/ui/login", {}, csrf_cookie)
    assert status == 403
    status, _, _ = post(served, "/ui/logout", {"csrf": Signer().csrf_token("x")}, csrf_cookie)
    assert status == 403  # a token, but for another browser's cookie


def test_with_keys_pages_need_a_login_and_the_key_stays_out_of_urls(tmp_path: Path) -> None:
    config = tmp_path / "brook.toml"
    config.write_text(key_stanza("ops", KEY, ["admin"], ["*"]))
    served = Served(tmp_path / "data", config=config)
    try:
        response = get(served, "/ui/topics/x?partition=1")
        assert response.status == 303
        assert response.getheader("location") == "/ui/login?next=/ui/topics/x%3Fpartition%3D1"
        login = get(served, "/ui/login")
        csrf_cookie = (login.getheader("set-cookie") or "").split(";")[0]
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
        connection.request("GET", "/ui/login", headers={"cookie": csrf_cookie})
        page = connection.getresponse().read().decode()
        connection.close()
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        assert token is not None
        status, headers, _ = post(
            served,
            "/ui/login",
            {"csrf": token.group(1), "key": KEY, "next": "https://elsewhere.example/"},
            csrf_cookie,
        )
        assert status == 303 and headers["location"] == "/ui"  # never off the dashboard
        session = headers["set-cookie"]
        assert session.startswith("brook_session=ops.") and KEY not in session
        assert "HttpOnly" in session and "SameSite=Strict" in session
        cookie = f"{csrf_cookie}; {session.split(';')[0]}"
        assert get(served, "/ui", {"cookie": cookie}).status == 200
        forged = cookie.replace("brook_session=ops.", "brook_session=root.")
        assert get(served, "/ui", {"cookie": forged}).status == 303
        assert all(KEY not in line for line in served.log)
    finally:
        served.close()


def login(served: Served, key: str) -> tuple[str, str]:
    """Log in as a browser would: (the cookies to send, the page's CSRF token)."""
    first = get(served, "/ui/login")
    csrf_cookie = (first.getheader("set-cookie") or "").split(";")[0]
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.request("GET", "/ui/login", headers={"cookie": csrf_cookie})
    page = connection.getresponse().read().decode()
    connection.close()
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    status, headers, _ = post(
        served, "/ui/login", {"csrf": found.group(1), "key": key}, csrf_cookie
    )
    assert status == 303, "the login was refused"
    return f"{csrf_cookie}; {headers['set-cookie'].split(';')[0]}", found.group(1)


def test_actions_need_the_admin_scope(tmp_path: Path) -> None:
    reader = "a-reader-key-of-the-ui-http-test"
    served = serve_with_keys(tmp_path, KEY, reader, ["*"])
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}", api_key=KEY) as b:
            b.topic("jobs").append(b"doomed")
            queue = b.queue("jobs", "workers", max_attempts=1)
            queue.nack(queue.lease(1, timeout=1), reason="boom")
            cookie, token = login(served, reader)
            fields = {"csrf": token, "error": "boom", "confirm": "yes"}
            status, _, body = post(served, "/ui/queues/jobs/workers/redrive", fields, cookie)
            assert status == 403 and "admin" in body
            assert queue.stats()["dead"] == 1
            cookie, token = login(served, KEY)
            fields["csrf"] = token
            status, headers, _ = post(served, "/ui/queues/jobs/workers/redrive", fields, cookie)
            assert status == 303 and headers["location"].endswith("?redriven=1")
            assert queue.stats()["dead"] == 0
    finally:
        served.close()


def test_records_from_a_time(tmp_path: Path) -> None:
    served = Served(tmp_path / "data")
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}") as b:
            b.topic("t").append_many([brook.Record(b"early %d" % i) for i in range(60)])
            time.sleep(0.05)
            b.topic("t").append_many([brook.Record(b"late %d" % i) for i in range(60)])
            early, late = b.topic("t").read(0, 59, 2)
        assert late.timestamp > early.timestamp
        status, page = served.request("GET", f"/ui/topics/t?at={late.timestamp}")
        assert status == 200
        offsets = [int(o) for o in re.findall(r'data-offset="(\d+)"', page)]
        assert offsets == list(range(109, 59, -1))  # from the first late record, 50 of them
        moment = datetime.datetime.fromtimestamp(late.timestamp / 1000, datetime.UTC)
        status, page = served.request("GET", f"/ui/topics/t?at={moment:%Y-%m-%dT%H:%M:%S.%f}")
        assert status == 200 and 'data-offset="109"' in page
        for bad in ("yesterday", "2026-13-45T99:99"):
            status, _ = served.request("GET", f"/ui/topics/t?at={bad}")
            assert status == 400, bad
    finally:
        served.close()


def test_who_may_see_and_do_what(tmp_path: Path) -> None:
    """The dashboard's auth matrix: no session is sent to the login; a key sees only
    its topics; endpoints and every action need the admin scope."""
    reader = "a-reader-key-limited-to-orders"
    served = serve_with_keys(tmp_path, KEY, reader, ["orders*"])
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}", api_key=KEY) as b:
            b.topic("orders").append(b"o")
            b.topic("secret").append(b"s")
            b.queue("orders", "workers")
        pages = {
            "/ui": (200, 200),
            "/ui/topics/orders": (200, 200),
            "/ui/topics/secret": (403, 200),
            "/ui/groups": (200, 200),
            "/ui/queues": (200, 200),
            "/ui/queues/orders/workers": (200, 200),
            "/ui/queues/secret/workers": (403, 404),
            "/ui/endpoints": (403, 200),
            "/ui/timers": (200, 200),
            "/ui/storage": (200, 200),
            "/ui/workers": (200, 200),
        }
        reader_cookie, reader_token = login(served, reader)
        admin_cookie, _ = login(served, KEY)
        for path, (as_reader, as_admin) in pages.items():
            response = get(served, path)
            assert response.status == 303, path
            assert (response.getheader("location") or "").startswith("/ui/login?next=")
            assert get(served, path, {"cookie": reader_cookie}).status == as_reader, path
            assert get(served, path, {"cookie": admin_cookie}).status == as_admin, path
        actions = {
            "/ui/queues/orders/workers/redrive": {"record": "0.0"},
            "/ui/endpoints/any/disable": {},
            "/ui/timers/cancel": {"id": "x"},
            "/ui/workers/revoke": {"ref": "tasks.x/0/0"},
        }
        for path, fields in actions.items():
            status, _, _ = post(served, path, {"csrf": reader_token, **fields}, reader_cookie)
            assert status == 403, path
            status, _, _ = post(served, path, {"csrf": reader_token, **fields}, "")
            assert status == 403, path  # no cookie: no CSRF token can match
    finally:
        served.close()


def test_the_replay_form_takes_whole_hours_only(tmp_path: Path) -> None:
    served = serve_with_keys(tmp_path, KEY, "a-reader-key-limited-to-orders", ["orders*"])
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}", api_key=KEY) as b:
            b.create_endpoint("hook", "https://hooks.example.com/x", ["orders"])
        cookie, token = login(served, KEY)
        path = "/ui/endpoints/hook/replay"
        for hours in ("0", "-1", "1.5", "abc", "", "8761"):
            status, _, body = post(served, path, {"csrf": token, "hours": hours}, cookie)
            assert status == 400 and "replay the last 1 to 8760 hours" in body, (hours, status)
        status, headers, _ = post(served, path, {"csrf": token, "hours": "3"}, cookie)
        assert status == 303 and "to+be+sent+again" in headers["location"]
        status, _, _ = post(
            served, "/ui/endpoints/nope/replay", {"csrf": token, "hours": "3"}, cookie
        )
        assert status == 404
    finally:
        served.close()


def test_a_topic_s_page_shows_where_its_lake_stands(tmp_path: Path) -> None:
    served = Served(tmp_path / "data", "--lake", "--lake-lag-ms", "3600000")
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}") as client:
            client.topic("orders").append_many([brook.Record(b"x")] * 3)
            q = client.queue("orders", "billing")
            q.ack(q.lease(timeout=0))

            def page() -> str:
                connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
                connection.request("GET", "/ui/topics/orders")
                html = connection.getresponse().read().decode()
                connection.close()
                return html

            before = page()
            assert '<p class="lake" data-pending="3">0 Parquet files' in before
            assert "3 records not in it yet" in before
            client.lake_sync("orders")
            after = page()
            assert '<p class="lake" data-pending="0">1 Parquet file,' in after
            assert "every record in it" in after
            assert re.search(r'<tr data-group="billing">.*?<td class="n">1</td>', after)
    finally:
        served.close()
