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
import datetime
import html
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import msgspec

from brook import limits
from brook.api import QueueApi as Queue
from brook.broker import Broker
from brook.config import ApiKey
from brook.errors import (
    BadRequest,
    BrookError,
    Closed,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    Unauthorized,
)
from brook.models import EndpointInfo
from brook.portal_links import PortalLinks
from brook.server import pipeline
from brook.server.auth import Authenticator, endpoint_unreached, may_use
from brook.server.http import Request, Response
from brook.server.query import whole_or
from brook.server.router import Route, Router
from brook.server.ui import portal, render, views
from brook.server.ui import workers as worker_views
from brook.server.ui.session import CSRF_COOKIE, SESSION_COOKIE, Signer, cookies, set_cookie

log = logging.getLogger("brook.ui")

PREFIX = "/ui"
FORM_BYTES_MAX = limits.dashboard_form_bytes_max
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

    def __init__(self, key: ApiKey | None, portal: bool = False) -> None:
        self.key = key
        self.portal = portal
        """A customer's portal (server/ui/portal.py): its tenant's endpoints only."""

    @property
    def name(self) -> str:
        return self.key.name if self.key is not None else ""

    @property
    def admin(self) -> bool:
        return self.key is None or "admin" in self.key.scopes

    def may_see(self, topic: str) -> bool:
        return self.key is None or may_use(self.key, topic)

    def beyond(self, endpoint: EndpointInfo) -> str | None:
        """Why the key may not see or change this endpoint (None: it may), as the API's
        routes decide it: every pattern within the key's, its tenant's only."""
        if self.key is None:
            return None
        return endpoint_unreached(self.key, endpoint.name, endpoint.topics, endpoint.tenant)


@dataclass
class Visit:
    """One request to the dashboard, once its route is known: who looks, the browser's
    CSRF cookie, and a posted form's fields (checked against that cookie)."""

    request: Request
    viewer: Viewer | None
    csrf: str
    form: dict[str, list[str]] = field(default_factory=dict)

    @property
    def query(self) -> dict[str, str]:
        return self.request.query


Page = Callable[..., Awaitable[Response]]


class Dashboard:
    def __init__(
        self,
        broker: Broker,
        auth: Authenticator,
        read: Reader,
        storage: str,
        router: Router | None = None,
    ) -> None:
        self.broker = broker
        self.auth = auth
        self.read = read
        """Runs a call off the event loop (storage may be slow)."""
        self.storage = storage
        self.signer = Signer()
        self._links: PortalLinks | None = None
        """Checks portal links (made on first use: the key is in storage)."""
        self.rates = views.Rates()
        self.streams = views.StreamGroups()
        self.started_s = time.monotonic()
        self._ticker: asyncio.Task[None] | None = None
        self.templates = render.environment()
        self.router = router or Router()
        """The server's router (the API's too): every page and action is a route of kind
        "page", with the scope it needs, in the API's words
        (router.SCOPES): None (anyone: the login, the static files), "any" (a logged-in
        key; pages of a topic also need the key to cover the topic), "admin" (a key
        with the admin scope)."""
        q = PREFIX + "/queues/{topic}/{group}"
        for method, path, handler, scope in (
            ("GET", PREFIX + "/static/{name}", self.static, None),
            ("GET", PREFIX + "/login", self.login_page, None),
            ("GET", PREFIX + "/portal/{token}", self.open_portal, None),
            ("POST", PREFIX + "/login", self.login, None),
            ("POST", PREFIX + "/logout", self.logout, "any"),
            ("GET", PREFIX, self.overview, "any"),
            ("GET", PREFIX + "/topics/{topic}", self.topic, "any"),
            ("GET", PREFIX + "/groups", self.groups, "any"),
            ("GET", PREFIX + "/queues", self.queues, "any"),
            ("GET", q, self.queue, "any"),
            ("GET", q + "/trace", self.trace, "any"),
            ("GET", q + "/redrive", self.redrive_page, "any"),
            ("POST", q + "/redrive", self.redrive, "admin"),
            ("GET", PREFIX + "/workers", self.workers, "any"),
            ("POST", PREFIX + "/workers/revoke", self.revoke, "admin"),
            ("GET", PREFIX + "/timers", self.timers, "any"),
            ("POST", PREFIX + "/timers/cancel", self.cancel_timer, "admin"),
            ("GET", PREFIX + "/storage", self.storage_page, "any"),
            ("GET", PREFIX + "/endpoints", self.endpoints, "admin"),
            ("GET", PREFIX + "/event-types", self.event_types, "any"),
            ("GET", PREFIX + "/endpoints/{name}", self.endpoint, "admin"),
            ("POST", PREFIX + "/endpoints/{name}/{action}", self.endpoint_action, "admin"),
        ):
            self.router.add(method, path, handler, scope, "page")

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
            response = await self._dispatch(request, browser, csrf_cookie)
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

    async def _dispatch(self, request: Request, browser: dict[str, str], csrf: str) -> Response:
        """The request pipeline the API's is (server/pipeline.py): route, then, in order,
        the form's CSRF token (a post), the login, the route's scope, the key's topics;
        then the page or action."""
        caller = _Browser(self, browser, csrf)
        path = request.path.rstrip("/") or PREFIX
        try:
            route, params, viewer = pipeline.route(self.router, request, path, caller)
        except NotFound:
            raise NotFound(f"no such page: {request.path}") from None
        page: Response = await route.handler(Visit(request, viewer, csrf, caller.form), **params)
        return page

    # ------------------------------------------------------------ pages

    async def overview(self, visit: Visit) -> Response:
        name = visit.query.get("name", "")[: limits.topic_name_chars_max]
        overview = await self.read(
            views.overview,
            self.broker,
            self.rates,
            self.started_s,
            self.storage,
            lambda topic: _may_see(visit, topic),
            name,
            whole_or(visit.query, "page", 1),
        )
        return self._page("overview.html", visit, page=overview, name=name)

    async def topic(self, visit: Visit, topic: str) -> Response:
        query = visit.query
        page = await self.read(
            views.topic,
            self.broker,
            topic,
            whole_or(query, "partition", 0),
            whole_or(query, "before", None),
            query.get("key", ""),
            query.get("form", "auto"),
            _time(query.get("at", "")),
        )
        return self._page("topic.html", visit, page=page)

    async def groups(self, visit: Visit) -> Response:
        streams = await self.read(self.streams.rows, self.broker)
        rows = [row for row in streams if _may_see(visit, row.topic)]
        return self._page("groups.html", visit, rows=rows)

    async def queues(self, visit: Visit) -> Response:
        rows = await self.read(views.queue_rows, self.broker, self.rates)
        rows = [row for row in rows if _may_see(visit, row.topic)]
        return self._page("queues.html", visit, rows=rows)

    async def queue(self, visit: Visit, topic: str, group: str) -> Response:
        query = visit.query
        page = await self.read(
            views.queue,
            self.broker,
            self.rates,
            topic,
            group,
            query.get("error"),
            query.get("after"),
        )
        return self._page("queue.html", visit, page=page, redriven=query.get("redriven"))

    async def trace(self, visit: Visit, topic: str, group: str) -> Response:
        partition, offset = (
            whole_or(visit.query, "partition", 0),
            whole_or(visit.query, "offset", 0),
        )
        steps = await self.read(views.trace, self.broker, topic, group, partition, offset)
        return self._page(
            "trace.html",
            visit,
            topic=topic,
            group=group,
            partition=partition,
            offset=offset,
            steps=steps,
        )

    async def redrive_page(self, visit: Visit, topic: str, group: str) -> Response:
        error = visit.query.get("error", "")
        found = self._user_queue(topic, group)
        count = next((e.dead for e in found.dead_errors() if e.group == error), 0)
        return self._page("redrive.html", visit, topic=topic, group=group, error=error, count=count)

    async def workers(self, visit: Visit) -> Response:
        page = await self.read(worker_views.workers, self.broker)
        page.running = {
            task: shown
            for task, rows in page.running.items()
            if (shown := [r for r in rows if _may_see(visit, r.job.ref.partition("/")[0])])
        }
        return self._page("workers.html", visit, page=page, done=visit.query.get("done"))

    async def revoke(self, visit: Visit) -> Response:
        ref = (_one(visit.form, "ref") or "").strip()
        terminate = _one(visit.form, "terminate") == "yes"
        reason = f"revoked from the dashboard by {_name(visit)}"
        done = await self.read(worker_views.revoke, self.broker, ref, terminate, reason)
        log.info("dashboard: %s: job %s %s", _name(visit), ref, done)
        return _redirect(f"{PREFIX}/workers?{urllib.parse.urlencode({'done': f'{ref}: {done}'})}")

    async def timers(self, visit: Visit) -> Response:
        lookup = visit.query.get("id", "").strip()
        topic, after = visit.query.get("topic", "").strip(), visit.query.get("after", "")
        page = await self.read(views.timers, self.broker, lookup, topic, after)
        if page.found is not None and not _may_see(visit, page.found.topic):
            page.found = None
        shown = [t for t in page.listed.timers if _may_see(visit, t.topic)]
        page.listed = msgspec.structs.replace(page.listed, timers=shown)
        page.schedules = [s for s in page.schedules if _may_see(visit, s.topic)]
        return self._page(
            "timers.html", visit, page=page, done=visit.query.get("done"), now_ms=render.now_ms()
        )

    async def storage_page(self, visit: Visit) -> Response:
        page = await self.read(views.storage, self.broker, self.started_s)
        return self._page("storage.html", visit, page=page, where=self.storage)

    async def event_types(self, visit: Visit) -> Response:
        types = await self.read(self.broker.event_types)
        return self._page("event_types.html", visit, types=types)

    async def endpoints(self, visit: Visit) -> Response:
        viewer = visit.viewer
        reaches = None if viewer is None else (lambda info: viewer.beyond(info) is None)
        query = visit.query
        name = query.get("name", "")[: limits.topic_name_chars_max]
        tenant = query.get("tenant", "")[: limits.topic_name_chars_max]
        state = query.get("state", "all")
        page = await self.read(
            views.endpoint_rows,
            self.broker,
            reaches,
            name,
            tenant,
            state,
            whole_or(query, "page", 1),
        )
        return self._page(
            "endpoints.html",
            visit,
            page=page,
            rows=page.rows,
            name=name,
            tenant=tenant,
            state=state,
            states=views.ENDPOINT_STATES,
        )

    def _reached(self, visit: Visit, info: EndpointInfo) -> None:
        why = visit.viewer.beyond(info) if visit.viewer is not None else None
        if why is not None:
            raise Forbidden(why)

    async def endpoint(self, visit: Visit, name: str) -> Response:
        self._reached(visit, await self.read(lambda: self.broker.endpoint(name).info()))
        page = await self.read(views.endpoint, self.broker, name)
        return self._page(
            "endpoint.html",
            visit,
            page=page,
            done=visit.query.get("done"),
            now_ms=render.now_ms(),
            replay_hours_max=limits.replay_hours_max,
        )

    async def static(self, visit: Visit, name: str) -> Response:
        suffix = name[name.rfind(".") :] if "." in name else ""
        if "/" in name or suffix not in STATIC_TYPES:
            raise NotFound(f"no such file: {html.escape(name)}")
        try:
            data = resources.files("brook.server.ui").joinpath("static", name).read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no such file: {name}") from None
        return Response(200, data, STATIC_TYPES[suffix])

    # ------------------------------------------------------------ actions (admin, CSRF)

    async def redrive(self, visit: Visit, topic: str, group: str) -> Response:
        found = self._user_queue(topic, group)
        form = visit.form
        chosen = views.positions(form.get("record", []))
        error = _one(form, "error")
        if error is not None and _one(form, "confirm") == "yes":
            dead = found.dead_records(error, None, 10**9)
            chosen = [(d.partition, d.offset) for d in dead]
        elif not chosen:
            raise BadRequest("choose the records to redrive, or an error to redrive all of")
        redriven = await self.read(found.redrive, None, chosen)
        log.info(
            "dashboard: %s redrove %d records of %s/%s",
            _name(visit),
            redriven,
            topic,
            group,
        )
        base = f"{PREFIX}/queues/{urllib.parse.quote(topic)}/{urllib.parse.quote(group)}"
        return _redirect(f"{base}?redriven={redriven}")

    async def cancel_timer(self, visit: Visit) -> Response:
        timer_id = (_one(visit.form, "id") or "").strip()
        info = await self.read(self.broker.timer, timer_id) if timer_id else None
        if info is None or not _may_see(visit, info.topic):
            raise NotFound(f"no timer {timer_id!r}")
        cancelled = await self.read(self.broker.cancel_timer, timer_id)
        done = "cancelled" if cancelled else f"not cancelled: it is {info.state} already"
        log.info("dashboard: %s: timer %s %s", _name(visit), timer_id, done)
        query = urllib.parse.urlencode({"id": timer_id, "done": done})
        return _redirect(f"{PREFIX}/timers?{query}")

    async def endpoint_action(self, visit: Visit, name: str, action: str) -> Response:
        handle = await self.read(self.broker.endpoint, name)
        self._reached(visit, await self.read(handle.info))
        if action == "enable":
            await self.read(handle.enable)
            done = "enabled"
        elif action == "disable":
            await self.read(handle.disable)
            done = "disabled: its records wait in their queue groups"
        elif action == "redrive":
            done = f"{await self.read(handle.redrive)} dead records redriven"
        elif action == "replay":
            hours = _one(visit.form, "hours") or ""
            if not hours.isdigit() or not 1 <= int(hours) <= limits.replay_hours_max:
                raise BadRequest(
                    f"replay the last 1 to {limits.replay_hours_max} hours, not {hours!r}"
                )
            since_ms = render.now_ms() - int(hours) * 3_600_000
            count = await self.read(handle.replay, None, since_ms)
            done = f"{count} records of the last {hours} hours to be sent again"
        elif action == "rotate":
            secret = await self.read(handle.rotate_secret)
            log.info("dashboard: %s: endpoint %s rotate", _name(visit), name)
            shown = self._page("secret.html", visit, name=name, secret=secret)
            shown.headers.append(("cache-control", "no-store"))  # shown once: never kept
            return shown
        elif action == "resend":
            resent = await self.read(handle.resend, _one(visit.form, "webhook_id") or "")
            where = f"{resent.topic}:{resent.partition}:{resent.offset}"
            done = {
                "resent": f"{where} sent once more",
                "redriven": f"{where} was dead: sent again, its attempts counted afresh",
            }.get(resent.state, f"{where} is on its way already: not sent twice")
        elif action == "test":
            result = await self.read(handle.test)
            shown = result.status if result.status is not None else result.error
            done = f"test request answered {shown} in {result.latency_ms:.0f} ms"
        else:
            raise NotFound(f"no such action on an endpoint: {action}")
        log.info("dashboard: %s: endpoint %s %s", _name(visit), name, action)
        query = urllib.parse.urlencode({"done": done})
        return _redirect(f"{PREFIX}/endpoints/{urllib.parse.quote(name)}?{query}")

    # ------------------------------------------------------------ logging in

    async def login_page(self, visit: Visit) -> Response:
        if not self.auth.enabled:
            return _redirect(PREFIX)  # no keys: nothing to log in with
        return self._page("login.html", visit, next=visit.query.get("next", PREFIX))

    async def login(self, visit: Visit) -> Response:
        form = visit.form
        target = _one(form, "next") or PREFIX
        if not target.startswith(PREFIX) or target.startswith(f"{PREFIX}/login"):
            target = PREFIX  # never off the dashboard
        if not self.auth.enabled:
            return _redirect(target)
        try:
            key = self.auth.identify(f"Bearer {_one(form, 'key') or ''}")
        except Unauthorized:
            log.warning("dashboard: a login with an unknown key was refused")
            response = self._page("login.html", visit, next=target, error="That key is not valid.")
            response.status = 401
            return response
        response = _redirect(target)
        session = self.signer.session(key.name, render.now_ms())
        response.headers.append(("set-cookie", set_cookie(SESSION_COOKIE, session)))
        return response

    async def open_portal(self, visit: Visit, token: str) -> Response:
        """A portal link: a session for its tenant until the link runs out, then its
        endpoints. A link forged, altered or expired is a 403 that says what to do."""
        if self._links is None:
            self._links = PortalLinks(await self.read(self.broker.portal_key))
        opened = self._links.opened(token, render.now_ms())
        if opened is None:
            raise Forbidden("this portal link is not valid, or has expired; ask for a new one")
        tenant, until_ms = opened
        response = _redirect(f"{PREFIX}/endpoints")
        session = self.signer.session(f"{portal.NAME_PREFIX}{tenant}", render.now_ms(), until_ms)
        max_age = max(1, (until_ms - render.now_ms()) // 1000)
        response.headers.append(("set-cookie", set_cookie(SESSION_COOKIE, session, max_age)))
        log.info("dashboard: a portal link for tenant %s was opened", tenant)
        return response

    async def logout(self, visit: Visit) -> Response:
        response = _redirect(f"{PREFIX}/login" if self.auth.enabled else PREFIX)
        response.headers.append(("set-cookie", set_cookie(SESSION_COOKIE, "", 0)))
        return response

    def _viewer(self, browser: dict[str, str]) -> Viewer:
        name = self.signer.session_key(browser.get(SESSION_COOKIE), render.now_ms())
        tenant = portal.tenant_of(name) if name is not None else None
        if tenant is not None:  # a customer's portal, keys or not
            return Viewer(portal.viewer_key(tenant), portal=True)
        if not self.auth.enabled:
            return Viewer(None)
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

    # ------------------------------------------------------------ answers

    def _user_queue(self, topic: str, group: str) -> Queue:
        """A queue group users made (the broker's own, named __..., are shown with
        their endpoints)."""
        found = self.broker.find_queue(topic, group)
        if found is None or group.startswith("__"):
            raise NotFound(f"no queue group {group!r} on topic {topic!r}")
        return found

    def _page(self, template: str, visit: Visit | None, **values: Any) -> Response:
        csrf = visit.csrf if visit is not None else values.pop("csrf")
        body = self.templates.get_template(template).render(
            csrf=self.signer.csrf_token(csrf),
            viewer=visit.viewer if visit is not None else None,
            keys=self.auth.enabled,
            prefix=PREFIX,
            **values,
        )
        return Response(200, body.encode(), "text/html; charset=utf-8")

    def _error(self, error: BrookError, csrf: str) -> Response:
        response = self._page(
            "error.html", None, csrf=csrf, status=error.status, message=str(error)
        )
        response.status = error.status
        if isinstance(error, MethodNotAllowed):
            response.headers.append(("allow", error.allowed))
        return response

    async def _tick(self) -> None:
        """Sample every topic's end offsets for the append rates, while the server runs.
        A failing sample is the dashboard's alone: logged, shown in /v1/health and
        /metrics as an isolated failure, and tried again at the next tick."""
        while True:
            try:
                with self.broker.isolated_task("dashboard", "append rates"):
                    await self.read(self.rates.sample, self.broker)  # it walks every group
            except Closed:
                return
            await asyncio.sleep(limits.dashboard_rate_every_s)


def _may_see(visit: Visit, topic: str) -> bool:
    return visit.viewer is None or visit.viewer.may_see(topic)


def _name(visit: Visit) -> str:
    return (visit.viewer.name if visit.viewer is not None else "") or "-"


def _one(fields: dict[str, list[str]], name: str) -> str | None:
    """A form field's value (its last, if repeated), or None."""
    values = fields.get(name)
    return values[-1] if values else None


def _redirect(location: str) -> Response:
    return Response(303, b"", "text/plain; charset=utf-8", [("location", location)])


def _query_string(request: Request) -> str:
    return "?" + urllib.parse.urlencode(request.query) if request.query else ""


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


class _Browser:
    """A browser asking, as the request pipeline knows a caller (pipeline.Caller): by its
    session cookie (or a portal's), its CSRF cookie, and the form it posts."""

    def __init__(self, dashboard: Dashboard, browser: dict[str, str], csrf: str) -> None:
        self.dashboard = dashboard
        self.browser = browser
        self.csrf = csrf
        self.form: dict[str, list[str]] = {}
        self.template = ""

    @property
    def keys(self) -> bool:
        return self.dashboard.auth.enabled

    def identify(self, request: Request) -> Viewer:
        return self.dashboard._viewer(self.browser)

    def prepare(self, request: Request, route: Route) -> None:
        self.template = route.template
        if request.method == "POST":
            self.form = self.dashboard._form(request, self.csrf)

    def admit(self, request: Request, scope: str, topic: str | None) -> Viewer:
        viewer = self.dashboard._viewer(self.browser)
        if viewer.portal and (request.method, self.template) not in portal.PAGES:
            raise Forbidden("this portal shows its tenant's endpoints only")
        if scope == "admin" and not viewer.admin:
            need = "for actions" if request.method == "POST" else "endpoints need"
            raise Forbidden(f"key {viewer.name!r} lacks the 'admin' scope {need}")
        if topic is not None and not viewer.may_see(topic):
            raise Forbidden(f"key {viewer.name!r} may not use topic {topic!r}")
        return viewer
