"""Request smuggling, oversized heads and slow clients against a real `brook serve`.

A request whose framing is ambiguous (Content-Length beside Transfer-Encoding,
two lengths, obs-fold, a bare LF, a bad chunk size, an unknown transfer coding)
could be read one way by a proxy in front of Brook and another way by Brook,
letting a second request ride inside the first. Each is answered 400 and the
connection is closed, and a request hidden behind it is never executed. Heads
too large get 414 or 431 (the client still reads the answer), and many slow
clients do not starve a quick one.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.served import Served
from tests.waiting import slow

POST = (
    b"POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\ncontent-type: application/octet-stream\r\n"
)
SMUGGLED = (
    b"POST /v1/topics/smuggled/records HTTP/1.1\r\nHost: x\r\n"
    b"content-type: application/octet-stream\r\ncontent-length: 3\r\n\r\nbad"
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("framing") / "data")
    yield server
    server.close()


def exchange(served: Served, raw: bytes, seconds: float = 5) -> bytes:
    """Send `raw`, then read until the server closes (it must, within `seconds`)."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=seconds) as connection:
        # The server may answer and stop reading before all is sent: the answer is there.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            connection.sendall(raw)
        answer = b""
        deadline = time.monotonic() + slow(seconds)
        while time.monotonic() < deadline:
            chunk = connection.recv(65536)
            if not chunk:
                return answer
            answer += chunk
    raise AssertionError(f"the connection stayed open; got {answer[:200]!r}")


AMBIGUOUS = {
    "content-length and transfer-encoding": b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "transfer-encoding and content-length": b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
    "two content-lengths": b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    "obs-fold": b"Content-Length: 3\r\nX-A: a\r\n b\r\n\r\nabc",
    "space before colon": b"Content-Length : 3\r\n\r\nabc",
    "chunked not last": b"Transfer-Encoding: chunked, identity\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    "unknown coding": b"Transfer-Encoding: xchunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    "bad chunk size": b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    "signed content-length": b"Content-Length: +3\r\n\r\nabc",
    "negative content-length": b"Content-Length: -3\r\n\r\nabc",
    "NUL in a header": b"X-A: a\x00b\r\nContent-Length: 3\r\n\r\nabc",
}


@pytest.mark.parametrize("framing", list(AMBIGUOUS), ids=list(AMBIGUOUS))
def test_ambiguous_framing_is_400_closed_and_smuggles_nothing(served: Served, framing: str) -> None:
    answer = exchange(served, POST + AMBIGUOUS[framing] + SMUGGLED)
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 400"), answer[:300]
    assert b"connection: close" in head
    assert answer.count(b"HTTP/1.1") == 1, "a second request was answered"
    assert served.request("GET", "/v1/topics/smuggled")[0] == 404


def test_bare_lf_line_endings_are_400(served: Served) -> None:
    answer = exchange(served, b"POST /v1/topics/t/records HTTP/1.1\nContent-Length: 3\n\nabc")
    assert answer.startswith(b"HTTP/1.1 400")


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /v1/topics?" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", b"414"),
        (POST + b"X-Big: " + b"a" * 300_000 + b"\r\nContent-Length: 1\r\n\r\nx", b"431"),
        (POST + b"".join(b"X-%d: y\r\n" % i for i in range(5000)) + b"\r\n", b"431"),
    ],
    ids=["long target", "one huge header", "many headers"],
)
def test_oversized_heads_are_answered_and_closed(served: Served, raw: bytes, status: bytes) -> None:
    answer = exchange(served, raw)
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:300]
    assert b"connection: close" in answer.split(b"\r\n\r\n", 1)[0]
    assert served.request("GET", "/v1/health")[0] == 200


def test_many_slow_clients_do_not_starve_a_quick_one(served: Served) -> None:
    """200 connections each sending a header byte every 0.2 s (a slowloris, below the
    connection cap): a quick client's requests are still answered at once."""
    stop = threading.Event()
    slow = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(200)]

    def trickle() -> None:
        for connection in slow:
            connection.sendall(b"GET /v1/health HTTP/1.1\r\n")
        while not stop.is_set():
            for connection in slow:
                with contextlib.suppress(OSError):  # timed out and closed: as it should be
                    connection.sendall(b"x")
            stop.wait(0.2)

    thread = threading.Thread(target=trickle)
    thread.start()
    try:
        time.sleep(0.5)
        latencies = []
        for _ in range(50):
            started = time.monotonic()
            assert served.request("GET", "/v1/health")[0] == 200
            status, _ = served.request("POST", "/v1/topics/quick/records", b"v")
            assert status == 200
            latencies.append(time.monotonic() - started)
        latencies.sort()
        assert latencies[len(latencies) // 2] < 0.1, f"median {latencies[25]:.3f} s"
        assert latencies[-1] < 1.0, f"slowest {latencies[-1]:.3f} s"
    finally:
        stop.set()
        thread.join()
        for connection in slow:
            connection.close()
