"""Real HTTP receivers on 127.0.0.1 for delivery tests: they answer as told (2xx,
500, 410, 429 with Retry-After, hang, slowly) and keep every request they got."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests import waiting


@dataclass
class Got:
    """One request a receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Answer:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


class Receiver:
    """A threaded HTTP server; `answer(got)` decides each answer (default: 200)."""

    def __init__(self, answer: Callable[[Got], Answer] | None = None) -> None:
        self.answer = answer or (lambda got: Answer())
        self.got: list[Got] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                got = Got(
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    time.monotonic(),
                )
                with receiver._lock:
                    receiver.got.append(got)
                answer = receiver.answer(got)
                if answer.delay_s:
                    time.sleep(answer.delay_s)
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 256  # the default 5 drops connections of a busy sender

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a sender that died (kill -9 tests) resets its connections

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def requests(self) -> list[Got]:
        with self._lock:
            return list(self.got)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for(condition: Callable[[], object], seconds: float = 20.0) -> None:
    waiting.wait_for(condition, seconds, every_s=0.01)
