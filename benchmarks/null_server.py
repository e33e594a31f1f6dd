"""The HTTP stack alone: Brook's connection handling with a handler that does nothing.

`python -m benchmarks.null_server PORT` serves 200 `{}` to every request until
SIGTERM, so a benchmark can show the stack's ceiling beside Brook's own numbers.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import uvloop

from brook.server.http import Connections, HttpProtocol, Request, Response

EMPTY = Response(200, b"{}")


async def nothing(request: Request) -> Response:
    return EMPTY


async def main(port: int) -> None:
    loop = asyncio.get_running_loop()
    connections = Connections()
    server = await loop.create_server(lambda: HttpProtocol(nothing, connections), "127.0.0.1", port)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print(f"ready {server.sockets[0].getsockname()[1]}", flush=True)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1])))
