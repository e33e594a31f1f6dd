"""The HTTP server over an embedded broker, in this process, for tests that reach
into the broker while requests are served (inject a failure, slow a read)."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from typing import Any

import brook
from brook.server.app import Server


class InProcess:
    """The HTTP server over an embedded broker, on a thread of its own."""

    def __init__(self, broker: brook.Broker) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = Server(broker, "127.0.0.1", 0)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)

    def get(self, path: str) -> tuple[int, Any]:
        return self.request("GET", path)

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
        status, text = self.request_text(method, path, body)
        return status, json.loads(text)

    def request_text(self, method: str, path: str, body: bytes | None = None) -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            headers = {"content-type": "application/octet-stream"} if body is not None else {}
            connection.request(method, path, body=body, headers=headers)
            answer = connection.getresponse()
            return answer.status, answer.read().decode()
        finally:
            connection.close()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()
