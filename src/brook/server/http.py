"""HTTP/1.1 connections over asyncio, parsed by httptools.

A thin shell: it turns bytes into Requests, hands them to the application one
at a time per connection (so pipelined responses keep their order), and
writes Responses back. Limits are enforced here:

- a malformed request gets 400, and the connection is closed;
- a body over request_bytes_max gets 413, at once from its Content-Length (or as
  soon as it grows past it);
- the bytes of request bodies held in memory across all connections (being
  read, waiting, being answered) are capped at inflight_bytes_max: a request
  that would pass it gets 503 with Retry-After at once, so a flood of large
  requests cannot exhaust memory. A body's declared length is reserved when its
  headers arrive.

A refused body (413, 503) is read and dropped, never kept, and the connection
then closes (within refused_linger_s).

A request's head is bounded: a target over url_bytes_max gets 414, headers over
headers_bytes_max or headers_count_max get 431, and the connection closes
(counted as the bytes arrive, so one endless header line cannot grow memory
either). Malformed framing (Content-Length with Transfer-Encoding, two lengths,
obs-fold, bare LF, a bad chunk size) is refused by the parser: 400 and a close,
so no request can be smuggled past another.

Slow and idle clients are bounded too (a slowloris holds many connections open
by sending a byte now and then): a request's headers must arrive within
header_timeout_s of its first byte and its body within body_timeout_s of its
headers (else 408 and a close), a connection with no request in progress is
closed after idle_timeout_s, and past connections_max open connections a new one
is answered 503 and closed. One sweep a second checks every deadline, so the
path of a request pays only for reading the clock.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast
from urllib.parse import parse_qsl, unquote

import httptools

from brook import limits
from brook.config import ApiKey
from brook.errors import (
    BadRequest,
    BrookError,
    HeadersTooLarge,
    MethodNotAllowed,
    Overloaded,
    RecordTooLarge,
    RequestTimeout,
    UriTooLong,
)
from brook.wire import encode, error_body

log = logging.getLogger("brook.server")
access_log = logging.getLogger("brook.access")


@dataclass(frozen=True)
class HttpLimits:
    """The limits the HTTP layer enforces (brook/limits.py has their defaults)."""

    request_bytes_max: int = limits.request_bytes_max
    inflight_bytes_max: int = limits.inflight_bytes_max_default
    header_timeout_s: float = limits.header_timeout_s_default
    body_timeout_s: float = limits.body_timeout_s_default
    idle_timeout_s: float = limits.idle_timeout_s_default
    connections_max: int = limits.connections_max_default


class Request:
    __slots__ = ("body", "headers", "held", "key", "method", "path", "query", "size", "started")

    def __init__(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        headers: dict[str, str],
        body: bytes,
        held: int = 0,
    ) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        """Header names are lower-case; a repeated header keeps its last value."""
        self.body = body
        self.key: ApiKey | None = None
        """The API key the request was authorised with, when keys are configured."""
        self.held = held
        """Bytes counted against inflight_bytes_max for it, released once answered."""
        self.size = len(body)
        self.started = time.monotonic()


class Response:
    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        content_type: str = "application/json",
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or []


def media_type(request: Request) -> str:
    """The request's content-type without its parameters, lower-case ("" if none)."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def json_response(document: Any, status: int = 200) -> Response:
    return Response(status, encode(document))


def error_response(error: BrookError) -> Response:
    extra = None
    if error.status == 401:
        extra = [("www-authenticate", 'Bearer realm="brook"')]
    elif isinstance(error, Overloaded):
        extra = [("retry-after", str(limits.overloaded_retry_after_s))]
    elif isinstance(error, MethodNotAllowed) and error.allowed:
        extra = [("allow", error.allowed)]
    return Response(error.status, error_body(error), headers=extra)


App = Callable[[Request], Awaitable[Response]]
SINGLE_HEADERS = frozenset(("authorization", "content-type", "content-length", "host", "cookie"))
"""Headers a request carries once: given twice, which one counts is ambiguous (a proxy
may read the first, the server the last: a key or a body read two ways), so a 400."""
_JOINED_BODY_MAX = 16 * 1024
"""Bodies up to this size are sent joined to their head (a copy cheaper than a second buffer)."""


@functools.lru_cache(maxsize=256)
def _head_start(status: int, content_type: str, keep_alive: bool) -> bytes:
    """The head of a response up to its length: the same for most responses."""
    connection = "keep-alive" if keep_alive else "close"
    return (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: {content_type}\r\n"
        f"connection: {connection}\r\ncontent-length: "
    ).encode()


def _head(response: Response, keep_alive: bool) -> bytes:
    start = _head_start(response.status, response.content_type, keep_alive)
    if not response.headers:
        return b"%s%d\r\n\r\n" % (start, len(response.body))
    extra = "".join(f"{name}: {value}\r\n" for name, value in response.headers).encode()
    return b"%s%d\r\n%s\r\n" % (start, len(response.body), extra)


class Connections:
    """The open connections and the requests being handled (for a graceful stop), the
    request-body bytes they hold in memory (for inflight_bytes_max), and their deadlines."""

    def __init__(self, http_limits: HttpLimits | None = None, access_log: bool = False) -> None:
        self.limits = http_limits or HttpLimits()
        self.access_log = access_log
        """Log one line per request answered (brook.access, at info)."""
        self.open: set[HttpProtocol] = set()
        self.busy = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.stopping = False
        self.inflight_bytes_max = self.limits.inflight_bytes_max
        self.held_bytes = 0
        self.held_bytes_peak = 0
        self.refused = 0
        """Requests answered 503 because inflight_bytes_max was reached."""
        self.refused_connections = 0
        """Connections answered 503 because connections_max were open."""
        self.timed_out = 0
        """Requests answered 408 (headers or body too slow)."""
        self._sweeper: asyncio.Task[None] | None = None

    def start_sweeping(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def stop_sweeping(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(limits.connection_sweep_s)
            now = time.monotonic()
            for connection in list(self.open):
                deadline = connection.deadline
                if deadline is not None and now > deadline:
                    connection.deadline_passed()

    def started(self) -> None:
        self.busy += 1
        self.idle.clear()

    def finished(self) -> None:
        self.busy -= 1
        if self.busy == 0:
            self.idle.set()


class HttpProtocol(asyncio.Protocol):
    def __init__(self, app: App, connections: Connections) -> None:
        self.app = app
        self.connections = connections
        self.limits = connections.limits
        self.request_bytes_max = connections.limits.request_bytes_max
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.pending: collections.deque[tuple[Request | BrookError, bool]] = collections.deque()
        self.worker: asyncio.Task[None] | None = None
        self._idle: asyncio.Future[None] | None = None
        """Set while the worker waits for the next request."""
        self.paused = False
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._size = 0
        self._declared: int | None = None
        self._held = 0
        """Bytes this connection holds against inflight_bytes_max."""
        self._message_held = 0
        """...of which the message being read."""
        self._broken = False
        self._discarding = False
        """A refused message's body is being read and dropped (then the connection closes)."""
        self._refusal_written = False
        self.phase = "idle"
        """idle (no request in progress), headers, body, or answering."""
        self.deadline: float | None = None
        """When the phase must have ended (monotonic seconds); None: no deadline."""
        self._over_cap = False
        self.peer = ""
        self._head_bytes = 0
        """Bytes of the head read in chunks that ended inside it (the parser buffers them)."""
        self._header_bytes = 0
        self._header_count = 0

    # ------------------------------------------------------------ asyncio

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        connections = self.connections
        if connections.access_log:
            address = transport.get_extra_info("peername")
            self.peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else ""
        if len(connections.open) >= self.limits.connections_max:
            # Answered once its request's headers are in (a reply before the request is
            # read would be lost to a reset), within the header timeout at most.
            self._over_cap = True
            connections.refused_connections += 1
            self.deadline = time.monotonic() + self.limits.header_timeout_s
        else:
            self.deadline = time.monotonic() + self.limits.idle_timeout_s
        connections.open.add(self)

    def deadline_passed(self) -> None:
        """The sweep found this connection past its deadline."""
        phase = self.phase
        self.deadline = None
        if phase in ("headers", "body") and not self._broken and not self._discarding:
            self.connections.timed_out += 1
            timeout = (
                self.limits.header_timeout_s if phase == "headers" else self.limits.body_timeout_s
            )
            self._reject(
                RequestTimeout(f"the request's {phase} did not arrive within {timeout:g} s")
            )
            asyncio.get_running_loop().call_later(limits.refused_linger_s, self._close)
        else:
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.open.discard(self)
        self._release(self._held)
        self.transport = None
        if self.worker is not None:
            self.worker.cancel()

    def data_received(self, data: bytes) -> None:
        if self._broken:
            return
        in_head = self.phase == "headers"
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._reject(BadRequest("protocol upgrades are not supported"))
        except httptools.HttpParserError as exc:
            self._reject(BadRequest(f"malformed HTTP request: {exc}"))
        if in_head and self.phase == "headers" and not self._broken:
            # The whole chunk was head, still unfinished: the parser holds it.
            self._head_bytes += len(data)
            if self._head_bytes > limits.headers_bytes_max:
                self._reject(self._headers_too_large())

    # ------------------------------------------------------------ httptools callbacks

    def on_message_begin(self) -> None:
        self.phase = "headers"
        self.deadline = time.monotonic() + self.limits.header_timeout_s
        self._url = b""
        self._headers = {}
        self._body = []
        self._size = 0
        self._declared = None
        self._message_held = 0
        self._head_bytes = self._header_bytes = self._header_count = 0
        self._repeated: str | None = None

    def on_url(self, url: bytes) -> None:
        if self._broken:
            return
        self._url += url
        if len(self._url) > limits.url_bytes_max:
            self._reject(
                UriTooLong(
                    f"the request target is over url_bytes_max ({limits.url_bytes_max} bytes)"
                )
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._broken:
            return
        self._header_count += 1
        self._header_bytes += len(name) + len(value)
        if (
            self._header_count > limits.headers_count_max
            or self._header_bytes > limits.headers_bytes_max
        ):
            self._reject(self._headers_too_large())
            return
        field = name.decode("latin-1").lower()
        if field in SINGLE_HEADERS and field in self._headers:
            self._repeated = field  # which one decides? neither: a 400 when it is read
        self._headers[field] = value.decode("latin-1")

    def _headers_too_large(self) -> HeadersTooLarge:
        return HeadersTooLarge(
            f"the request's headers are over {limits.headers_bytes_max} bytes or "
            f"{limits.headers_count_max} fields (headers_bytes_max, headers_count_max)"
        )

    def on_headers_complete(self) -> None:
        if self._broken or self._discarding:
            return
        self.phase = "body"
        self.deadline = time.monotonic() + self.limits.body_timeout_s
        if self._over_cap:
            self._refuse(
                Overloaded(
                    f"the server has {self.limits.connections_max} connections open "
                    "(connections_max); try again soon"
                )
            )
            return
        length = self._headers.get("content-length")
        if length is None or not length.isdigit():
            return  # none (or chunked): bytes are counted as they come
        declared = int(length)
        if declared > self.request_bytes_max:
            self._refuse(self._too_large())
        elif declared:
            self._declared = declared
            self._hold(declared)

    def on_body(self, body: bytes) -> None:
        if self._broken or self._discarding:
            return
        self._size += len(body)
        if self._size > self.request_bytes_max:
            self._refuse(self._too_large())
            return
        if self._declared is None:
            self._hold(len(body))
        if not self._discarding:
            self._body.append(body)

    def on_message_complete(self) -> None:
        if self._discarding:  # the refused message is read: nothing after it is
            self._discarding = False
            self._broken = True
            if self._refusal_written:
                self._close()
            return
        if self._broken:
            return
        self.phase = "answering"
        self.deadline = None
        keep_alive = bool(self.parser.should_keep_alive())
        item: Request | BrookError
        try:
            item = self._request()
        except BrookError as exc:
            item = exc
            self._release(self._message_held)
        self._message_held = 0
        self._enqueue(item, keep_alive)

    def _too_large(self) -> RecordTooLarge:
        return RecordTooLarge(
            f"the request body exceeds request_bytes_max ({self.request_bytes_max} bytes)"
        )

    def _hold(self, size: int) -> None:
        """Count `size` more bytes of the message being read against the cap; past
        it, refuse the message (503, unread) instead."""
        connections = self.connections
        if connections.held_bytes + size > connections.inflight_bytes_max:
            connections.refused += 1
            self._refuse(
                Overloaded(
                    f"the server holds {connections.held_bytes} bytes of requests already "
                    f"(inflight_bytes_max {connections.inflight_bytes_max}); try again soon"
                )
            )
            return
        connections.held_bytes += size
        connections.held_bytes_peak = max(connections.held_bytes_peak, connections.held_bytes)
        self._held += size
        self._message_held += size

    def _release(self, size: int) -> None:
        size = min(size, self._held)
        self._held -= size
        self.connections.held_bytes -= size

    def _refuse(self, error: BrookError) -> None:
        """Answer the message being read with `error` at once (after the requests
        before it); drop the rest of its body as it comes, keeping none of it, and
        close once it is read, or after `refused_linger_s`. Closing before the body is
        read would reset the connection, and most clients would never see the answer."""
        self._release(self._message_held)
        self._message_held = 0
        self._body = []
        self._discarding = True
        self._enqueue(error, keep_alive=False)
        asyncio.get_running_loop().call_later(limits.refused_linger_s, self._close)

    def _enqueue(self, item: Request | BrookError, keep_alive: bool) -> None:
        self.pending.append((item, keep_alive))
        if (
            len(self.pending) >= limits.pipeline_requests_max
            and self.transport is not None
            and not self.paused
        ):
            self.transport.pause_reading()
            self.paused = True
        if self.worker is None:
            # One task per connection for its whole life: a task per request costs more.
            self.worker = asyncio.get_running_loop().create_task(self._work())
        elif self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def _request(self) -> Request:
        try:
            url = httptools.parse_url(self._url)
        except httptools.HttpParserInvalidURLError:
            raise BadRequest("the request target is not a valid URL") from None
        try:
            path = (url.path or b"/").decode()
            if "%" in path:
                path = unquote(path, errors="strict")
            pairs = (
                parse_qsl(url.query.decode(), keep_blank_values=True, errors="strict")
                if url.query
                else []
            )
        except UnicodeDecodeError:
            raise BadRequest("the URL is not valid UTF-8") from None
        query = dict(pairs)
        if len(query) != len(pairs):
            twice = next(name for i, (name, _) in enumerate(pairs) if name in dict(pairs[:i]))
            raise BadRequest(f"the query parameter {twice[:40]!r} is given more than once")
        if self._repeated is not None:
            raise BadRequest(f"the request carries more than one {self._repeated} header")
        method = self.parser.get_method().decode()
        body = b"".join(self._body)
        self._body = []
        return Request(method, path, query, self._headers, body, self._message_held)

    # ------------------------------------------------------------ answering

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while self.transport is not None:
            if not self.pending:
                if self.phase == "answering":  # not already reading the next request
                    self.phase = "idle"
                    self.deadline = time.monotonic() + self.limits.idle_timeout_s
                self._idle = loop.create_future()
                await self._idle
                self._idle = None
                continue
            item, keep_alive = self.pending.popleft()
            if (
                self.paused
                and len(self.pending) < limits.pipeline_requests_max // 2
                and self.transport is not None
            ):
                self.transport.resume_reading()
                self.paused = False
            if isinstance(item, BrookError):
                response = error_response(item)
            else:
                self.connections.started()
                try:
                    response = await self.app(item)
                finally:
                    self.connections.finished()
                    self._release(item.held)
                    item.body = b""
            keep_alive = keep_alive and not self.connections.stopping
            if self.connections.access_log:
                self._log_access(item, response)
            self._write(response, keep_alive, isinstance(item, Request) and item.method == "HEAD")
            if not keep_alive:
                if self._discarding:
                    self._refusal_written = True  # closed once the body is read
                elif self._broken:
                    self._close_after_answer()
                else:
                    self._close()
                return

    def _log_access(self, item: Request | BrookError, response: Response) -> None:
        """One line per request: never its headers (they may hold an API key) or body."""
        peer = self.peer
        if isinstance(item, Request):
            ms = round((time.monotonic() - item.started) * 1000, 3)
            access_log.info(
                "%s %s %d %.1f ms",
                item.method,
                item.path,
                response.status,
                ms,
                extra={
                    "method": item.method,
                    "path": item.path,
                    "status": response.status,
                    "ms": ms,
                    "bytes_in": item.size,
                    "bytes_out": len(response.body),
                    "peer": peer,
                },
            )
        else:  # refused before it became a request (malformed, too large, too slow)
            access_log.info(
                "refused %d %s",
                response.status,
                item.code,
                extra={"status": response.status, "error": item.code, "peer": peer},
            )

    def _write(self, response: Response, keep_alive: bool, head_only: bool = False) -> None:
        """Write the response; for HEAD, its head alone (with the body's length)."""
        if self.transport is None:
            return
        head = _head(response, keep_alive)
        if head_only:
            self.transport.write(head)
        elif len(response.body) <= _JOINED_BODY_MAX:
            self.transport.write(head + response.body)  # one buffer: the cheapest send
        else:
            self.transport.writelines([head, response.body])

    def _reject(self, error: BrookError) -> None:
        """Answer a request that cannot be parsed after those before it, then close:
        the byte stream is out of step, so nothing after it can be trusted."""
        self._broken = True
        self._discarding = False
        self._enqueue(error, keep_alive=False)

    def _close_after_answer(self) -> None:
        """After answering a request that could not be read (its stream is out of
        step): send FIN, drop whatever still comes, close after refused_linger_s.
        Closing with unread bytes would send a reset, and the client, still
        sending, would never read the answer."""
        if self.transport is None:
            return
        if self.transport.can_write_eof():
            self.transport.write_eof()
        asyncio.get_running_loop().call_later(limits.refused_linger_s, self._close)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    def close_if_idle(self) -> None:
        """Close the connection unless a request is being answered (used when stopping)."""
        if not self.pending and (self.worker is None or self._idle is not None):
            self._close()
