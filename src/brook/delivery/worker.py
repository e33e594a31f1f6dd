"""A delivery worker process: `python -m brook.delivery.worker FD ALLOW_PRIVATE CONNECTIONS`.

Started by the broker (workers.py) on one end of a socket pair, inherited as FD. It
reads `Define`, `Forget` and `Attempt` frames, sends each attempt (sender.py) as a task
of its own, and writes a `Done` frame per attempt as it ends. It keeps no state that
matters: the end of its input (the broker closed it, or died) ends it, the broker's
end kills it (processes.die_with_parent: a worker stuck in a send too), and SIGINT and
SIGTERM are the broker's to act on (a Ctrl-C in a terminal reaches the whole process
group: the broker finishes or gives back what is in flight, then closes this).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from typing import Any, cast

import uvloop

from brook import limits, processes
from brook.delivery import addresses
from brook.delivery.endpoint import Endpoint
from brook.delivery.outcome import ErrorKind, Result
from brook.delivery.sender import Sender
from brook.delivery.workers import (
    Attempt,
    Define,
    Done,
    Forget,
    Frames,
    Outbox,
    decode_to_worker,
    frame,
)


class WorkerProtocol(asyncio.Protocol):
    def __init__(self, sender: Sender, ended: asyncio.Future[None]) -> None:
        self.sender = sender
        self.ended = ended
        self.endpoints: dict[str, Endpoint] = {}
        self.outbox: Outbox | None = None
        self._frames = Frames()
        self._tasks: set[asyncio.Task[Any]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.outbox = Outbox(cast(asyncio.Transport, transport))  # (uvloop's is not a subclass)

    def data_received(self, data: bytes) -> None:
        for body in self._frames.feed(data):
            message = decode_to_worker(body)
            if isinstance(message, Attempt):
                task = asyncio.get_running_loop().create_task(self._attempt(message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif isinstance(message, Define):
                self.endpoints[message.endpoint.name] = message.endpoint
                self.sender.forget(message.endpoint.name)
            elif isinstance(message, Forget):
                self.endpoints.pop(message.name, None)
                self.sender.forget(message.name)

    async def _attempt(self, asked: Attempt) -> None:
        endpoint = self.endpoints.get(asked.endpoint)
        if endpoint is None:
            result = Result(error=ErrorKind.CONNECTION, error_message="endpoint not defined")
        else:
            try:
                result = await self.sender.send(
                    endpoint, asked.record(), asked.attempt, asked.message_id, asked.now_ms
                )
            except Exception as exc:  # never leave the broker waiting without an answer
                result = Result(error=ErrorKind.CONNECTION, error_message=repr(exc)[:500])
        if self.outbox is not None:
            self.outbox.put(frame(Done(asked.id, result)))

    def connection_lost(self, exc: Exception | None) -> None:
        self.outbox = None
        if not self.ended.done():
            self.ended.set_result(None)


async def serve(fd: int, reach: addresses.Reach, connections_max: int) -> None:
    sender = Sender(addresses.system_resolver, reach, connections_max)
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()
    sock = socket.socket(fileno=fd)
    await loop.create_unix_connection(lambda: WorkerProtocol(sender, ended), sock=sock)
    try:
        while not ended.done():
            await asyncio.wait([ended], timeout=limits.delivery_worker_idle_check_s)
            await sender.close_idle()
    finally:
        await sender.close()


def main(argv: list[str]) -> None:
    processes.die_with_parent()  # killed with the broker, even a broker killed with -9
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fd, connections_max, reach = int(argv[0]), int(argv[1]), addresses.parsed(argv[2:4])
    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(serve(fd, reach, connections_max))


if __name__ == "__main__":
    main(sys.argv[1:])
