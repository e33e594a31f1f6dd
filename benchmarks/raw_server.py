"""The floor under any Python HTTP server: a bare uvloop protocol that answers at once.

`python -m benchmarks.raw_server PORT` answers `200 {}` to every request until
SIGTERM. It finds each request's end (the blank line, then Content-Length bytes)
and nothing else: no parser, no limits, no application. Issue 37's target puts one
durable record per request at 0.25x of this.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import uvloop

ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


class Answering(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = b""
        self.body_left = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        answers = 0
        while data:
            if self.body_left:
                taken = min(self.body_left, len(data))
                self.body_left -= taken
                data = data[taken:]
                if not self.body_left:
                    answers += 1
                continue
            self.buffer += data
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self.buffer[:end].lower(), self.buffer[end + 4 :]
            self.buffer = b""
            at = head.find(b"content-length:")
            self.body_left = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if not self.body_left:
                answers += 1
        if answers:
            self.transport.write(ANSWER * answers)


async def main(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Answering, "127.0.0.1", port)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print(f"ready {server.sockets[0].getsockname()[1]}", flush=True)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1])))
