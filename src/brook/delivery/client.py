"""The HTTP/1.1 client of delivery: one POST per connection at a time, kept alive,
parsed by httptools (the parser the server uses).

Why not aiohttp (what Brook used): measured per delivery on this machine, aiohttp's
request path cost 150-170 µs of CPU, more than everything else an attempt does in the
broker; a webhook POST needs little of what it offers (no redirects, no cookies, no
streaming, no compression: a body known in advance and the start of the answer). This
sends the request as one buffer and reads the answer with callbacks: about a fifth of
that (docs/PERFORMANCE.md, "Delivery").

What it does: connections pooled per (origin, address) within the caller's slots
(pool.py), idle ones kept limits.delivery_keepalive_s at most and never reused once the receiver said
`Connection: close`; TLS verified against the endpoint's host name (the system's
trust store); the answer's body read up to `excerpt_max` and then up to limits.delivery_drain_bytes_max to
keep the connection, beyond that the connection is closed instead. Header values are
checked for line breaks (no injected header can ride on a record's content-type).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping

import httptools

from brook import limits

_FORBIDDEN = ("\r", "\n", "\0")


class ProtocolError(Exception):
    """The receiver answered something that is not HTTP, or closed mid-answer."""


class Answer:
    __slots__ = ("excerpt", "location", "retry_after", "status")

    def __init__(
        self, status: int, retry_after: str | None, excerpt: bytes, location: str | None = None
    ) -> None:
        self.status = status
        self.retry_after = retry_after
        self.excerpt = excerpt
        self.location = location
        """The Location header as sent (a redirect's; not followed)."""


def request_head(method: str, target: str, headers: Mapping[str, str], length: int) -> bytes:
    """The request line and headers; raises ValueError for a line break in any of them."""
    lines = [f"{method} {target} HTTP/1.1"]
    for name, value in headers.items():
        if any(c in name or c in value for c in _FORBIDDEN):
            raise ValueError(f"header {name!r} holds a line break or NUL")
        lines.append(f"{name}: {value}")
    lines.append(f"content-length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Connection(asyncio.Protocol):
    """One connection to a receiver; one request at a time."""

    def __init__(self, excerpt_max: int) -> None:
        self.excerpt_max = excerpt_max
        self.transport: asyncio.Transport | None = None
        self.reusable = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Answer] | None = None
        self._body = bytearray()
        self._seen = 0
        self._retry_after: str | None = None
        self._location: str | None = None
        self._header: str = ""

    # ------------------------------------------------------------ the caller's side

    async def post(self, head: bytes, body: bytes, timeout_s: float) -> Answer:
        """The answer to one request; TimeoutError (and the connection closed) when it
        has not come whole within `timeout_s`. (A timer of its own: cheaper than
        asyncio.timeout, which this path paid for on every attempt.)"""
        assert self.transport is not None and self._waiter is None
        self.reusable = False
        self._body = bytearray()
        self._seen = 0
        self._retry_after = None
        self._location = None
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        timer = loop.call_later(timeout_s, self._fail, TimeoutError())
        self.transport.write(head + body if len(body) < 16_384 else head)
        if len(body) >= 16_384:
            self.transport.write(body)
        try:
            return await self._waiter
        finally:
            timer.cancel()
            self._waiter = None

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------ asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for: the connection is spoilt
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ProtocolError(f"not an HTTP answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self._fail(ProtocolError("the connection closed before a whole answer"))

    def _fail(self, exc: Exception) -> None:
        self.reusable = False
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------ httptools' callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered == b"retry-after":
            self._retry_after = value.decode("latin-1").strip()
        elif lowered == b"location":
            self._location = value[: limits.delivery_location_bytes_max].decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._seen += len(body)
        room = self.excerpt_max - len(self._body)
        if room > 0:
            self._body += body[:room]
        if self._seen > self.excerpt_max + limits.delivery_drain_bytes_max:
            self._answer(keep=False)  # too long to drain: the answer so far, then close

    def on_message_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._body = bytearray()  # an interim answer (103 Early Hints): the real one follows
            self._seen = 0
            self._location = None
            return
        self._answer(keep=self._parser.should_keep_alive())

    def _answer(self, keep: bool) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        self.reusable = keep
        self.idle_since = time.monotonic()
        waiter.set_result(
            Answer(
                self._parser.get_status_code(),
                self._retry_after,
                bytes(self._body),
                self._location,
            )
        )
        if not keep:
            self.close()


class Idle:
    """Idle connections of one origin, by the address they were made to."""

    def __init__(self) -> None:
        self._by_address: dict[str, list[Connection]] = {}

    def take(self, address: str) -> Connection | None:
        found = self._by_address.get(address)
        now = time.monotonic()
        while found:
            connection = found.pop()
            transport = connection.transport
            if (
                connection.reusable
                and transport is not None
                and not transport.is_closing()
                and now - connection.idle_since < limits.delivery_keepalive_s
            ):
                return connection
            connection.close()
        return None

    def give_back(self, address: str, connection: Connection) -> None:
        if connection.reusable:
            self._by_address.setdefault(address, []).append(connection)
        else:
            connection.close()

    def close(self) -> None:
        for connections in self._by_address.values():
            for connection in connections:
                connection.close()
        self._by_address.clear()


_TLS: ssl.SSLContext | None = None


def tls_context() -> ssl.SSLContext:
    """The system's trust store, made once (making a context reads it: milliseconds)."""
    global _TLS
    if _TLS is None:
        _TLS = ssl.create_default_context()
    return _TLS


async def post(
    idle: Idle,
    scheme: str,
    host: str,
    address: str,
    port: int,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    connect_timeout_s: float,
    excerpt_max: int,
    timeout_s: float,
) -> Answer:
    """POST `body` to `address` (checked by the caller) with `headers`, on a kept
    connection or a new one, the whole answer within `timeout_s` (a new connection
    within `connect_timeout_s` of it). Raises TimeoutError, OSError (connecting),
    ssl.SSLError, ProtocolError, ValueError (a header with a line break)."""
    head = request_head("POST", target, headers, len(body))
    connection = idle.take(address)
    if connection is None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with asyncio.timeout(min(connect_timeout_s, timeout_s)):
            _, connection = await loop.create_connection(
                lambda: Connection(excerpt_max),
                host=address,
                port=port,
                ssl=tls_context() if scheme == "https" else None,
                server_hostname=host if scheme == "https" else None,
            )
        timeout_s -= loop.time() - started
    try:
        answer = await connection.post(head, body, max(0.0, timeout_s))
    except BaseException:
        connection.close()
        raise
    idle.give_back(address, connection)
    return answer
