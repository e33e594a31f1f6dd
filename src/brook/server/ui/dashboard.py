"""The dashboard at /ui (SPEC §8): server-rendered pages for the people who run the
broker, served by the broker's own HTTP server.

Pages are Jinja2 templates over what `views` reads; forms are plain HTML posts;
one small script of our own (static/refresh.js) swaps a page's main part every
few seconds. Nothing is loaded from outside the broker, and the
Content-Security-Policy says so to the browser. With API keys configured, a page
needs a login (a key, checked as the API checks it; the session cookie names the
key, never holds it), and every action needs the `admin` scope and a CSRF token.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import html
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import jinja2

from brook.broker import Broker
from brook.config import ApiKey
from brook.errors import BadRequest, BrookError, Forbidden, NotFound, Unauthorized
from brook.server.auth import Authenticator, may_use
from brook.server.http import Request, Response
from brook.server.ui import views
from brook.server.ui.session import CSRF_COOKIE, SESSION_COOKIE, Signer, cookies, set_cookie

log = logging.getLogger("brook.ui")

PREFIX = "/ui"
FORM_BYTES_MAX = 64 * 1024
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
SECURITY_HEADERS = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
]

Reader = Callable[..., Awaitable[Any]]


class Viewer:
    """Who is looking: the key they logged in with (None when the broker has no keys)."""

    def __init__(self, key: ApiKey | None) -> None:
        self.key = key

    @property
    def name(self) -> str:
        return self.key.name if self.key is not None else ""

    @property
    def admin(self) -> bool:
        return self.key is None or "admin" in self.key.scopes

    def may_see(self, topic: str) -> bool:
        return self.key is None or may_use(self.key, topic)


class Dashboard:
    def __init__(self, broker: Broker, auth: Authenticator, read: Reader, storage: str) -> None:
        self.broker = broker
        self.auth = auth
        self.read = read
        """Runs a call off the event loop (storage may be slow)."""
        self.storage = storage
        self.signer = Signer()
        self.rates = views.Rates()
        self.streams = views.StreamGroups()
        self.started_s = time.monotonic()
        self._ticker: asyncio.Task[None] | None = None
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("brook.server.ui", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates.filters.update(
            {"count": _count, "size": _size, "duration": _duration, "time_ms": _time_ms}
        )
        self.templates.globals["sparkline"] = _sparkline

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()

    # ------------------------------------------------------------ requests

    async def __call__(self, request: Request) -> Response:
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        browser = cookies(request.headers.get("cookie"))
        csrf_cookie = browser.get(CSRF_COOKIE)
        set_cookies = []
        if not csrf_cookie:
            csrf_cookie = self.signer.new_csrf_cookie()
            set_cookies.append(set_cookie(CSRF_COOKIE, csrf_cookie))
        try:
            response = await self._route(request, browser, csrf_cookie)
        except Unauthorized:
            target = urllib.parse.quote(request.path + _query_string(request), safe="/")
            response = _redirect(f"{PREFIX}/login?next={target}")
        except BrookError as exc:
            response = self._error(exc, csrf_cookie)
        except Exception:
            log.exception("unexpected error answering %s %s", request.method, request.path)
            response = self._error(BrookError("internal error; see the server log"), csrf_cookie)
        response.headers.extend(("set-cookie", value) for value in set_cookies)
        response.headers.extend(SECURITY_HEADERS)
        return response

    async def _route(self, request: Request, browser: dict[str, str], csrf: str) -> Response:
        path = request.path.rstrip("/") or PREFIX
        method = "GET" if request.method == "HEAD" else request.method
        if path.startswith(f"{PREFIX}/static/"):
            return self._static(path.removeprefix(f"{PREFIX}/static/"))
        if path == f"{PREFIX}/login":
            if method == "POST":
                return self._login(request, csrf)
            if not self.auth.enabled:
                return _redirect(PREFIX)  # no keys: nothing to log in with
            return self._page("login.html", csrf, None, next=request.query.get("next", PREFIX))
        if method == "POST":
            form = self._form(request, csrf)
            viewer = self._viewer(browser)
            if path == f"{PREFIX}/logout":
                response = _redirect(f"{PREFIX}/login" if self.auth.enabled else PREFIX)
                response.headers.append(("set-cookie", set_cookie(SESSION_COOKIE, "", 0)))
                return response
            if not viewer.admin:
                raise Forbidden(f"key {viewer.name!r} lacks the 'admin' scope for actions")
            return await self._act(path, form, viewer)
        if method != "GET":
            raise BadRequest(f"{request.method} is not used by the dashboard; use GET or POST")
        viewer = self._viewer(browser)
        if path == PREFIX:
            overview = views.overview(self.broker, self.rates, self.started_s, self.storage)
            overview.topics = [t for t in overview.topics if viewer.may_see(t.name)]
            return self._page("overview.html", csrf, viewer, page=overview)
        parts = [urllib.parse.unquote(p) for p in path.removeprefix(PREFIX + "/").split("/")]
        query = request.query
        if parts == ["queues"]:
            rows = await self.read(views.queue_rows, self.broker, self.rates)
            rows = [row for row in rows if viewer.may_see(row.topic)]
            return self._page("queues.html", csrf, viewer, rows=rows)
        if len(parts) >= 3 and parts[0] == "queues":
            topic, group = parts[1], parts[2]
            if not viewer.may_see(topic):
                raise Forbidden(f"key {viewer.name!r} may not use topic {topic!r}")
            if len(parts) == 3:
                page = await self.read(
                    views.queue,
                    self.broker,
                    self.rates,
                    topic,
                    group,
                    query.get("error"),
                    query.get("after"),
                )
                return self._page(
                    "queue.html", csrf, viewer, page=page, redriven=query.get("redriven")
                )
            if parts[3:] == ["trace"]:
                partition, offset = _whole(query, "partition", 0), _whole(query, "offset", 0)
                steps = await self.read(views.trace, self.broker, topic, group, partition, offset)
                return self._page(
                    "trace.html",
                    csrf,
                    viewer,
                    topic=topic,
                    group=group,
                    partition=partition,
                    offset=offset,
                    steps=steps,
                )
            if parts[3:] == ["redrive"]:
                error = query.get("error", "")
                found = self.broker.find_queue(topic, group)
                if found is None or group.startswith("__"):
                    raise NotFound(f"no queue group {group!r} on topic {topic!r}")
                count = dict(found.dead_errors()).get(error, 0)
                return self._page(
                    "redrive.html", csrf, viewer, topic=topic, group=group, error=error, count=count
                )
        if parts == ["groups"]:
            streams = await self.read(self.streams.rows, self.broker)
            streams = [row for row in streams if viewer.may_see(row.topic)]
            return self._page("groups.html", csrf, viewer, rows=streams)
        if parts == ["storage"]:
            page = await self.read(views.storage, self.broker, self.started_s)
            return self._page("storage.html", csrf, viewer, page=page, where=self.storage)
        if parts == ["timers"]:
            lookup = query.get("id", "").strip()
            page = await self.read(views.timers, self.broker, lookup)
            if page.found is not None and not viewer.may_see(page.found.topic):
                page.found = None
            return self._page(
                "timers.html", csrf, viewer, page=page, done=query.get("done"), now_ms=_now_ms()
            )
        if parts[0] == "endpoints" and not viewer.admin:
            raise Forbidden(f"key {viewer.name!r} lacks the 'admin' scope endpoints need")
        if parts == ["endpoints"]:
            endpoints = await self.read(views.endpoint_rows, self.broker)
            return self._page("endpoints.html", csrf, viewer, rows=endpoints)
        if len(parts) == 2 and parts[0] == "endpoints":
            page = await self.read(views.endpoint, self.broker, parts[1])
            return self._page(
                "endpoint.html", csrf, viewer, page=page, done=query.get("done"), now_ms=_now_ms()
            )
        if len(parts) == 2 and parts[0] == "topics":
            name = parts[1]
            if not viewer.may_see(name):
                raise Forbidden(f"key {viewer.name!r} may not use topic {name!r}")
            page = await self.read(
                views.topic,
                self.broker,
                name,
                _whole(query, "partition", 0),
                _whole(query, "before", None),
                query.get("key", ""),
                query.get("form", "auto"),
                _time(query.get("at", "")),
            )
            return self._page("topic.html", csrf, viewer, page=page)
        raise NotFound(f"no such page: {request.path}")

    async def _act(self, path: str, form: dict[str, list[str]], viewer: Viewer) -> Response:
        """An action posted from a page (CSRF and the admin scope checked already)."""
        parts = [urllib.parse.unquote(p) for p in path.removeprefix(PREFIX + "/").split("/")]
        if len(parts) == 4 and parts[0] == "queues" and parts[3] == "redrive":
            topic, group = parts[1], parts[2]
            if not viewer.may_see(topic):
                raise Forbidden(f"key {viewer.name!r} may not use topic {topic!r}")
            found = self.broker.find_queue(topic, group)
            if found is None or group.startswith("__"):
                raise NotFound(f"no queue group {group!r} on topic {topic!r}")
            chosen = views.positions(form.get("record", []))
            error = _one(form, "error")
            if error is not None and _one(form, "confirm") == "yes":
                chosen = [(d.partition, d.offset) for d in found.dead_records(error, None, 10**9)]
            elif not chosen:
                raise BadRequest("choose the records to redrive, or an error to redrive all of")
            redriven = await self.read(found.redrive, None, chosen)
            log.info(
                "dashboard: %s redrove %d records of %s/%s",
                viewer.name or "-",
                redriven,
                topic,
                group,
            )
            base = f"{PREFIX}/queues/{urllib.parse.quote(topic)}/{urllib.parse.quote(group)}"
            return _redirect(f"{base}?redriven={redriven}")
        if len(parts) == 3 and parts[0] == "endpoints":
            return await self._endpoint_action(parts[1], parts[2], viewer)
        if parts == ["timers", "cancel"]:
            timer_id = (_one(form, "id") or "").strip()
            info = await self.read(self.broker.timer, timer_id) if timer_id else None
            if info is None or not viewer.may_see(info.topic):
                raise NotFound(f"no timer {timer_id!r}")
            cancelled = await self.read(self.broker.cancel_timer, timer_id)
            done = "cancelled" if cancelled else f"not cancelled: it is {info.state} already"
            log.info("dashboard: %s: timer %s %s", viewer.name or "-", timer_id, done)
            query = urllib.parse.urlencode({"id": timer_id, "done": done})
            return _redirect(f"{PREFIX}/timers?{query}")
        raise NotFound(f"no such action: {path}")

    async def _endpoint_action(self, name: str, action: str, viewer: Viewer) -> Response:
        handle = await self.read(self.broker.endpoint, name)
        if action == "enable":
            await self.read(handle.enable)
            done = "enabled"
        elif action == "disable":
            await self.read(handle.disable)
            done = "disabled: its records wait in their queue groups"
        elif action == "redrive":
            done = f"{await self.read(handle.redrive)} dead records redriven"
        elif action == "test":
            result = await self.read(handle.test)
            shown = result.status if result.status is not None else result.error
            done = f"test request answered {shown} in {result.latency_ms:.0f} ms"
        else:
            raise NotFound(f"no such action on an endpoint: {action}")
        log.info("dashboard: %s: endpoint %s %s", viewer.name or "-", name, action)
        query = urllib.parse.urlencode({"done": done})
        return _redirect(f"{PREFIX}/endpoints/{urllib.parse.quote(name)}?{query}")

    def _viewer(self, browser: dict[str, str]) -> Viewer:
        if not self.auth.enabled:
            return Viewer(None)
        name = self.signer.session_key(browser.get(SESSION_COOKIE), _now_ms())
        key = next((k for k in self.auth.keys if k.name == name), None)
        if key is None:
            raise Unauthorized("log in with an API key")
        return Viewer(key)

    def _form(self, request: Request, csrf: str) -> dict[str, list[str]]:
        """A posted form's fields (each with its values), once its CSRF token proved it
        came from our page."""
        if len(request.body) > FORM_BYTES_MAX:
            raise BadRequest(f"a form is at most {FORM_BYTES_MAX} bytes")
        try:
            text = request.body.decode()
        except UnicodeDecodeError:
            raise BadRequest("a form is UTF-8") from None
        fields: dict[str, list[str]] = {}
        for name, value in urllib.parse.parse_qsl(text, keep_blank_values=True):
            fields.setdefault(name, []).append(value)
        if not self.signer.csrf_ok(csrf, _one(fields, "csrf")):
            raise Forbidden("the form's CSRF token is missing or wrong; reload the page and retry")
        return fields

    def _login(self, request: Request, csrf: str) -> Response:
        form = self._form(request, csrf)
        target = _one(form, "next") or PREFIX
        if not target.startswith(PREFIX) or target.startswith(f"{PREFIX}/login"):
            target = PREFIX  # never off the dashboard
        if not self.auth.enabled:
            return _redirect(target)
        try:
            key = self.auth.identify(f"Bearer {_one(form, 'key') or ''}")
        except Unauthorized:
            log.warning("dashboard: a login with an unknown key was refused")
            response = self._page(
                "login.html", csrf, None, next=target, error="That key is not valid."
            )
            response.status = 401
            return response
        response = _redirect(target)
        response.headers.append(
            ("set-cookie", set_cookie(SESSION_COOKIE, self.signer.session(key.name, _now_ms())))
        )
        return response

    # ------------------------------------------------------------ answers

    def _page(self, template: str, csrf: str, viewer: Viewer | None, **values: Any) -> Response:
        body = self.templates.get_template(template).render(
            csrf=self.signer.csrf_token(csrf),
            viewer=viewer,
            keys=self.auth.enabled,
            prefix=PREFIX,
            **values,
        )
        return Response(200, body.encode(), "text/html; charset=utf-8")

    def _error(self, error: BrookError, csrf: str) -> Response:
        response = self._page("error.html", csrf, None, status=error.status, message=str(error))
        response.status = error.status
        return response

    def _static(self, name: str) -> Response:
        suffix = name[name.rfind(".") :] if "." in name else ""
        if "/" in name or suffix not in STATIC_TYPES:
            raise NotFound(f"no such file: {html.escape(name)}")
        try:
            data = resources.files("brook.server.ui").joinpath("static", name).read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no such file: {name}") from None
        return Response(200, data, STATIC_TYPES[suffix])

    async def _tick(self) -> None:
        """Sample every topic's end offsets for the append rates, while the server runs."""
        while True:
            with contextlib.suppress(BrookError):  # off the loop: it walks every queue group
                await self.read(self.rates.sample, self.broker)
            await asyncio.sleep(views.RATE_EVERY_S)


def _one(fields: dict[str, list[str]], name: str) -> str | None:
    """A form field's value (its last, if repeated), or None."""
    values = fields.get(name)
    return values[-1] if values else None


def _redirect(location: str) -> Response:
    return Response(303, b"", "text/plain; charset=utf-8", [("location", location)])


def _query_string(request: Request) -> str:
    return "?" + urllib.parse.urlencode(request.query) if request.query else ""


def _whole(query: dict[str, str], name: str, default: Any) -> Any:
    if name not in query or query[name] == "":
        return default
    text = query[name]
    if not text.isascii() or not text.isdigit() or len(text) > 19:
        raise BadRequest(f"{name} is a whole number, not {text[:40]!r}")
    return int(text)


def _time(text: str) -> int | None:
    """A time given as ms since the epoch, or as YYYY-MM-DDTHH:MM[:SS] in UTC (what a
    datetime-local field sends); None when not given."""
    text = text.strip()
    if not text:
        return None
    if text.isascii() and text.isdigit() and len(text) <= 16:
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(
            f"at is a time like 2026-11-25T14:30 (UTC) or ms since the epoch, not {text[:40]!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _count(n: int | float | None) -> str:
    return "\u2013" if n is None else f"{n:,.0f}"


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def _time_ms(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def _sparkline(points: list[float], width: int = 120, height: int = 24) -> str:
    """An inline SVG polyline of `points` (nothing fetched; allowed by the page's CSP)."""
    if len(points) < 2:
        return ""
    top = max(points) or 1.0
    step = width / (len(points) - 1)
    coords = " ".join(
        f"{i * step:.1f},{height - 2 - (p / top) * (height - 4):.1f}" for i, p in enumerate(points)
    )
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="appends per second over the last minute">'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{coords}"/></svg>'
    )
