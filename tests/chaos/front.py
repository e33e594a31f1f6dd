"""A TCP front for the chaos run's broker, as a load balancer is: clients and task
workers connect to one fixed port, and each new connection goes to the broker whose port
the target file names, so a take-over by a second broker moves them all (connections
open to the old one break, and the clients connect again).

Run as `python -m tests.chaos.front LISTEN_PORT TARGET_FILE`; prints `ready` once it
listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

CHUNK_BYTES = 65_536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until the end of one direction, then pass the end on (a half close)."""
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(CHUNK_BYTES):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def _serve(listen_port: int, target: Path) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            port = int(target.read_text())
            broker_r, broker_w = await asyncio.open_connection("127.0.0.1", port)
        except (OSError, ValueError):
            client_w.close()  # no broker there: the client sees a refused request
            return
        try:
            await asyncio.gather(_pipe(client_r, broker_w), _pipe(broker_r, client_w))
        finally:
            for writer in (broker_w, client_w):
                writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1]), Path(sys.argv[2])))
