"""HTTP framing without sockets: the connection protocol (server/http.py) fed bytes by
hand through a transport that only records what is written. However a client's bytes
are cut into reads, pipelined requests arrive whole, in order, and are answered in
order; framing that could smuggle a request is refused with 400 and a close."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from brook.server.http import Connections, HttpLimits, HttpProtocol, Request, Response
from tests.fuzz.targets import RecordingTransport


def converse(chunks: list[bytes]) -> tuple[list[tuple[str, str, bytes]], bytes, bool]:
    """Feed `chunks` to one connection; what the application saw, what was written
    back, and whether the connection was closed."""
    seen: list[tuple[str, str, bytes]] = []

    async def app(request: Request) -> Response:
        seen.append((request.method, request.path, request.body))
        return Response(200, f"{len(seen)}:{len(request.body)}".encode(), "text/plain")

    async def run() -> tuple[bytes, bool]:
        transport = RecordingTransport()
        protocol = HttpProtocol(app, Connections(HttpLimits()))
        protocol.connection_made(transport)  # type: ignore[arg-type]
        for chunk in chunks:
            protocol.data_received(chunk)
            await asyncio.sleep(0)
        for _ in range(50):  # let the connection's worker answer what it holds
            await asyncio.sleep(0)
        protocol.connection_lost(None)
        return bytes(transport.written), transport.closed

    written, closed = asyncio.run(run())
    return seen, written, closed


def encoded(method: str, path: str, body: bytes, chunked: bool) -> bytes:
    if chunked:
        framed = (f"{len(body):x}\r\n".encode() + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
        head = f"{method} {path} HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
        return head.encode() + framed
    head = f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
    return head.encode() + body


REQUESTS = st.lists(
    st.tuples(
        st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
        st.from_regex(r"/v1/[a-z0-9._-]{1,20}", fullmatch=True),
        st.binary(max_size=300),
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@settings(max_examples=150, deadline=None)
@given(requests=REQUESTS, points=st.lists(st.integers(0, 10_000), max_size=30))
def test_pipelined_requests_arrive_whole_and_in_order_however_the_bytes_are_cut(
    requests: list[tuple[str, str, bytes, bool]], points: list[int]
) -> None:
    stream = b"".join(encoded(*request) for request in requests)
    seen, written, closed = converse(cut(stream, points))
    assert seen == [(method, path, body) for method, path, body, _ in requests]
    answers = written.split(b"HTTP/1.1 200 OK\r\n")[1:]
    assert len(answers) == len(requests)
    for number, ((_, _, body, _), answer) in enumerate(zip(requests, answers, strict=True), 1):
        assert answer.endswith(f"{number}:{len(body)}".encode())
    assert not closed


@settings(max_examples=50, deadline=None)
@given(points=st.lists(st.integers(0, 500), max_size=10))
def test_a_request_that_could_smuggle_another_is_refused_and_the_connection_closed(
    points: list[int],
) -> None:
    """Content-Length beside Transfer-Encoding (RFC 9112 §6.1): the request behind it
    is never seen, however the bytes arrive."""
    smuggler = (
        b"POST /v1/a HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n"
        b"transfer-encoding: chunked\r\n\r\n0\r\n\r\nGET /v1/hidden HTTP/1.1\r\nhost: x\r\n\r\n"
    )
    seen, written, _ = converse(cut(smuggler, points))
    assert seen == []
    assert written.startswith(b"HTTP/1.1 400 ") and b"connection: close" in written.lower()
