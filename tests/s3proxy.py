"""An HTTP proxy between Brook and moto's S3 server that misbehaves on purpose.

Each request is read whole, then a `Fault` decides its fate: pass it on, delay
it, answer 503 without passing it on, pass it on and then answer 500 anyway
(the write landed, the client is told it failed), reset the connection before
or after passing it on, or never answer (a timeout). Runs an asyncio loop on a
thread of its own, bound to 127.0.0.1; `close` stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Fault:
    delay_s: float = 0.0
    refuse: bool = False
    """Answer 503 without passing the request on."""
    lose_answer: bool = False
    """Pass the request on, then answer 500: it happened, the client thinks not."""
    reset_before: bool = False
    reset_after: bool = False
    hang: bool = False


Plan = Callable[[str, str], Fault | None]
"""(method, path) -> what to do to this request; None passes it on untouched."""


def random_faults(seed: int, rate: float, delay_s: float = 0.0) -> Plan:
    """A plan that harms about `rate` of requests, each way alike, from `seed`."""
    rng = random.Random(seed)
    kinds = ["refuse", "lose_answer", "reset_before", "reset_after"]

    def plan(method: str, path: str) -> Fault | None:
        if rng.random() >= rate:
            return Fault(delay_s=delay_s) if delay_s else None
        fault = Fault(delay_s=delay_s + rng.uniform(0, 0.05))
        setattr(fault, rng.choice(kinds), True)
        return fault

    return plan


_SERVICE_UNAVAILABLE = (
    b"HTTP/1.1 503 Slow Down\r\ncontent-type: application/xml\r\ncontent-length: 77\r\n\r\n"
    b"<Error><Code>SlowDown</Code><Message>Please reduce your rate.</Message></Error>"
)
_INTERNAL_ERROR = (
    b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/xml\r\n"
    b"content-length: 80\r\n\r\n"
    b"<Error><Code>InternalError</Code><Message>We had a problem.</Message></Error>   "
)


async def _read_message(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """One HTTP message's head and body (by content-length or chunked); None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    fields = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        fields[name.strip().lower()] = value.strip()
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            body += chunk[:-2]
            if size == 0:  # the last chunk; its CRLF was read with it
                break
        head = _without(head, b"transfer-encoding")
        head = head[:-2] + b"content-length: %d\r\n\r\n" % len(body)
        return head, body
    length = int(fields.get(b"content-length", b"0"))
    body = await reader.readexactly(length) if length else b""
    return head, body


def _without(head: bytes, name: bytes) -> bytes:
    lines = head.split(b"\r\n")
    kept = [line for line in lines if not line.lower().startswith(name + b":")]
    return b"\r\n".join(kept)


class FaultyProxy:
    def __init__(self, upstream_port: int, plan: Plan | None = None) -> None:
        self.upstream_port = upstream_port
        self.plan: Plan = plan or (lambda method, path: None)
        self.requests = 0
        self.harmed = 0
        self.answered_bytes: Counter[str] = Counter()
        """Bytes of response bodies passed back to clients, by request method."""
        self.counted: Counter[str] = Counter()
        """Requests passed on, by method."""
        self.ignore_conditions = False
        """Drop If-Match / If-None-Match before passing requests on: a store that ignores them."""
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._started.wait()
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                message = await _read_message(reader)
                if message is None:
                    return
                if not await self._one(message, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, message: tuple[bytes, bytes], writer: asyncio.StreamWriter) -> bool:
        """Handle one request; False when the client connection must end."""
        head, body = message
        method, path, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        self.requests += 1
        fault = self.plan(method, path) or Fault()
        if (
            fault.refuse
            or fault.lose_answer
            or fault.reset_before
            or fault.reset_after
            or fault.hang
        ):
            self.harmed += 1
        if fault.delay_s:
            await asyncio.sleep(fault.delay_s)
        if fault.hang:
            await asyncio.sleep(3600)
        if fault.reset_before:
            return False
        if fault.refuse:
            writer.write(_SERVICE_UNAVAILABLE)
            await writer.drain()
            return True
        answer = await self._forward(head, body)
        self.counted[method] += 1
        self.answered_bytes[method] += len(answer) - len(answer.partition(b"\r\n\r\n")[0]) - 4
        if fault.reset_after:
            return False
        writer.write(_INTERNAL_ERROR if fault.lose_answer else answer)
        await writer.drain()
        return True

    async def _forward(self, head: bytes, body: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        try:
            head = _without(head, b"connection")
            if self.ignore_conditions:
                head = _without(_without(head, b"if-match"), b"if-none-match")
            writer.write(head[:-2] + b"connection: close\r\n\r\n" + body)
            await writer.drain()
            answer = await reader.read()
        finally:
            writer.close()
        response_head, _, response_body = answer.partition(b"\r\n\r\n")
        response_head = _without(response_head, b"connection")
        lowered = response_head.lower()
        if b"content-length:" not in lowered and b"transfer-encoding:" not in lowered:
            response_head += b"\r\ncontent-length: %d" % len(response_body)
        return response_head + b"\r\n\r\n" + response_body

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()  # connections held open by a hang, or by a keep-alive client
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
