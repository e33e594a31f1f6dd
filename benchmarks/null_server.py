"""The HTTP stack alone: Brook's connection handling with a handler that does nothing.

`python -m benchmarks.null_server PORT [STATUS [DELAY_S]]` serves STATUS (200) `{}`
to every request, after DELAY_S seconds (0), until SIGTERM: the stack's ceiling
beside Brook's own numbers, and fast, failing or hanging receivers for delivery.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable

import uvloop

from brook.server.http import Connections, HttpProtocol, Request, Response

EMPTY = Response(200, b"{}")


async def nothing(request: Request) -> Response:
    return EMPTY


def answering(status: int, delay_s: float) -> Callable[[Request], Awaitable[Response]]:
    answer = Response(status, b"{}")

    async def handler(request: Request) -> Response:
        if delay_s:
            await asyncio.sleep(delay_s)
        return answer

    return handler


async def main(port: int, status: int = 200, delay_s: float = 0.0) -> None:
    loop = asyncio.get_running_loop()
    connections = Connections()
    handler = nothing if (status, delay_s) == (200, 0.0) else answering(status, delay_s)
    server = await loop.create_server(lambda: HttpProtocol(handler, connections), "127.0.0.1", port)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print(f"ready {server.sockets[0].getsockname()[1]}", flush=True)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    uvloop.run(
        main(
            int(args[0]),
            int(args[1]) if len(args) > 1 else 200,
            float(args[2]) if len(args) > 2 else 0.0,
        )
    )
