"""Delivery's HTTP client against receivers that answer byte by byte as told: what a
broken, slow, chunked, closing or lying receiver gets from it."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from brook import limits
from brook.delivery import client
from brook.delivery.client import Idle, ProtocolError


class RawServer:
    """A TCP server on 127.0.0.1 that answers each connection with `answer(request)`
    (the raw bytes of each request, one per call; None closes the connection)."""

    def __init__(self, answer: Callable[[bytes], bytes | None], close_after: bool) -> None:
        self.answer = answer
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                head_end = buffer.find(b"\r\n\r\n")
                if head_end >= 0:
                    head = buffer[:head_end].decode("latin-1")
                    length = next(
                        int(line.split(":", 1)[1])
                        for line in head.split("\r\n")
                        if line.lower().startswith("content-length:")
                    )
                    end = head_end + 4 + length
                    if len(buffer) >= end:
                        request, buffer = buffer[:end], buffer[end:]
                        self.requests.append(request)
                        reply = self.answer(request)
                        if reply is None:
                            return
                        try:
                            conn.sendall(reply)
                        except OSError:  # the client closed first (an answer too long)
                            return
                        if self.close_after:
                            return
                        continue
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buffer += data

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def make(answer: Callable[[bytes], bytes | None], close_after: bool = False) -> RawServer:
        servers.append(RawServer(answer, close_after))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def _post(
    server: RawServer, idle: Idle, body: bytes = b"hello", headers: dict[str, str] | None = None
) -> client.Answer:
    async def run() -> client.Answer:
        async with asyncio.timeout(5):
            answer = await client.post(
                idle,
                "http",
                "receiver.example",
                "127.0.0.1",
                server.port,
                "/hook?x=1",
                {"host": "receiver.example", "content-type": "text/plain", **(headers or {})},
                body,
                5.0,
                16,
                5.0,
            )
        idle.close()
        await asyncio.sleep(0)
        return answer

    return asyncio.run(run())


def _posts(server: RawServer, count: int) -> list[client.Answer]:
    """`count` posts one after another on one loop (so kept connections are reused)."""

    async def run() -> list[client.Answer]:
        idle = Idle()
        out = []
        for _ in range(count):
            out.append(
                await client.post(
                    idle, "http", "h", "127.0.0.1", server.port, "/", {}, b"x", 5.0, 16, 5.0
                )
            )
        idle.close()
        await asyncio.sleep(0)  # (the transports close on the loop's next turn)
        return out

    return asyncio.run(run())


OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


def test_a_request_is_one_post_with_its_headers_and_length(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda request: OK)
    answer = _post(server, Idle(), b"hello", {"webhook-id": "t:0:1"})
    assert (answer.status, answer.excerpt, answer.retry_after) == (200, b"ok", None)
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /hook?x=1 HTTP/1.1"
    assert {"host: receiver.example", "webhook-id: t:0:1", "content-length: 5"} <= set(lines)
    assert body == b"hello"


def test_kept_connections_are_reused_and_a_close_is_honoured(
    serve: Callable[..., RawServer],
) -> None:
    server = serve(lambda request: OK)
    assert [a.status for a in _posts(server, 5)] == [200] * 5
    assert server.connections == 1
    closing = serve(
        lambda request: b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
    )
    assert [a.status for a in _posts(closing, 3)] == [200] * 3
    assert closing.connections == 3


def test_chunked_answers_retry_after_and_interim_answers(serve: Callable[..., RawServer]) -> None:
    chunked = (
        b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n"
        b"HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\ntransfer-encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    )
    server = serve(lambda request: chunked)
    answers = _posts(server, 2)
    assert [(a.status, a.retry_after, a.excerpt) for a in answers] == [
        (429, "7", b"hello world")
    ] * 2
    assert server.connections == 1


def test_only_the_start_of_a_long_answer_is_kept(serve: Callable[..., RawServer]) -> None:
    short = b"x" * 10_000
    server = serve(lambda r: b"HTTP/1.1 500 E\r\ncontent-length: 10000\r\n\r\n" + short)
    answers = _posts(server, 2)
    assert [(a.status, a.excerpt) for a in answers] == [(500, b"x" * 16)] * 2
    assert server.connections == 1, "drained and kept"
    huge = b"y" * (limits.delivery_drain_bytes_max + 100_000)
    big = serve(lambda r: b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(huge) + huge)
    answers = _posts(big, 2)
    assert [(a.status, a.excerpt) for a in answers] == [(200, b"y" * 16)] * 2
    assert big.connections == 2, "too long to drain: closed, not kept"


@pytest.mark.parametrize(
    "reply",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n",
        None,
    ],
    ids=["not-http", "cut-short", "smuggling-framing", "closed"],
)
def test_what_is_not_a_whole_http_answer_is_a_protocol_error(
    serve: Callable[..., RawServer], reply: bytes | None
) -> None:
    server = serve(lambda request: reply, close_after=True)
    with pytest.raises(ProtocolError):
        _post(server, Idle())


def test_a_header_with_a_line_break_is_refused_before_anything_is_sent(
    serve: Callable[..., RawServer],
) -> None:
    server = serve(lambda request: OK)
    with pytest.raises(ValueError, match="line break"):
        _post(server, Idle(), headers={"x-evil": "a\r\nx-injected: 1"})
    assert server.requests == []


def test_an_answer_that_does_not_come_is_a_timeout_and_the_connection_goes(
    serve: Callable[..., RawServer],
) -> None:
    server = serve(lambda request: b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nslow")

    async def run() -> float:
        idle = Idle()
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await client.post(
                idle, "http", "h", "127.0.0.1", server.port, "/", {}, b"x", 5, 16, 0.3
            )
        assert idle.take("127.0.0.1") is None, "a timed-out connection is not kept"
        return time.monotonic() - started

    assert 0.25 < asyncio.run(run()) < 2


def test_a_connection_refused_is_an_os_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()

    async def run() -> None:
        await client.post(Idle(), "http", "h", "127.0.0.1", port, "/", {}, b"x", 5.0, 16, 5.0)

    with pytest.raises(OSError):
        asyncio.run(run())


def test_tls_is_verified_against_the_endpoint_s_host_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key)),
            *("-out", str(cert), "-days", "1", "-subj", "/CN=receiver.example"),
            *("-addext", "subjectAltName=DNS:receiver.example"),
        ],
        check=True,
        capture_output=True,
    )
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept() -> None:
        while True:
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            try:
                with served.wrap_socket(raw, server_side=True) as conn:
                    conn.recv(65536)
                    conn.sendall(OK)
            except OSError:
                pass  # a client that refused the certificate

    threading.Thread(target=accept, daemon=True).start()

    def post(host: str) -> client.Answer:
        async def run() -> client.Answer:
            async with asyncio.timeout(5):
                return await client.post(
                    Idle(), "https", host, "127.0.0.1", port, "/", {}, b"x", 5.0, 16, 5.0
                )

        return asyncio.run(run())

    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            post("receiver.example")  # a certificate no trusted authority signed
        monkeypatch.setattr(client, "_TLS", ssl.create_default_context(cafile=str(cert)))
        assert post("receiver.example").status == 200
        with pytest.raises(ssl.SSLCertVerificationError):
            post("other.example")  # trusted, but not this endpoint's name
    finally:
        listener.close()
