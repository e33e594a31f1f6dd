"""Running the server: listen, serve, and stop gracefully.

Stopping (SIGTERM): stop accepting connections, let every request being
answered finish (appends wait for their batch to be durable), end long-polls
early, answer with `connection: close`, then close the broker.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import ssl
import threading

import brook
from brook import limits
from brook.broker import Broker
from brook.config import ApiKey
from brook.server.api import Api
from brook.server.auth import Authenticator
from brook.server.http import Connections, HttpLimits, HttpProtocol
from brook.server.metrics import ConnectionsCollector

log = logging.getLogger("brook.server")


class Server:
    def __init__(
        self,
        broker: Broker,
        host: str,
        port: int,
        keys: list[ApiKey] | None = None,
        tls: ssl.SSLContext | None = None,
        http_limits: HttpLimits | None = None,
        access_log: bool = False,
        where: str = "",
    ) -> None:
        self.broker = broker
        self.where = where
        """The data's location, as the operator named it (for the log and the dashboard)."""
        self.host = host
        self.port = port
        self.auth = Authenticator(keys or [])
        self.tls = tls
        self.connections = Connections(http_limits, access_log)
        self._server: asyncio.Server | None = None
        self.api: Api | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        api = self.api = Api(self.broker, loop, self.auth, self.where)
        api.registry.register(ConnectionsCollector(self.connections))
        try:
            self._server = await loop.create_server(
                lambda: HttpProtocol(api, self.connections),
                self.host,
                self.port,
                reuse_address=True,
                ssl=self.tls,
            )
        except OSError as exc:
            api.close()
            raise CannotListen(self.host, self.port, exc) from None
        self.port = self._server.sockets[0].getsockname()[1]
        self.connections.start_sweeping()

    async def stop(self) -> None:
        assert self._server is not None and self.api is not None
        self._server.close()
        self.connections.stopping = True
        self.api.stop()
        for connection in list(self.connections.open):
            connection.close_if_idle()
        try:
            await asyncio.wait_for(self.connections.idle.wait(), limits.server_stop_wait_s)
        except TimeoutError:
            log.warning("stopping with %d requests still in flight", self.connections.busy)
        for connection in list(self.connections.open):
            connection.close_if_idle()
        self.connections.stop_sweeping()
        self.api.close()


class CannotListen(Exception):
    """The address cannot be listened on; the message says what to do."""

    def __init__(self, host: str, port: int, error: OSError) -> None:
        if error.errno == errno.EADDRINUSE:
            why = f"port {port} on {host} is in use (another brook serve?)"
        elif error.errno == errno.EACCES:
            why = f"not allowed to listen on port {port} (ports below 1024 need privileges)"
        elif error.errno == errno.EADDRNOTAVAIL:
            why = f"{host} is not an address of this machine"
        else:
            why = f"cannot listen on {host}:{port}: {error.strerror or error}"
        super().__init__(f"{why}; choose another with --port / --host (BROOK_PORT, BROOK_HOST)")


async def serve(server: Server, where: str = "") -> None:
    """Serve until SIGTERM or SIGINT, then stop gracefully. `where` names the
    data's location for the start-up line."""
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    scheme = "https" if server.tls is not None else "http"
    keys = len(server.auth.keys)
    keys_note = f"{keys} API keys" if keys else "no API keys (open)"
    shown = server.host if ":" not in server.host else f"[{server.host}]"
    log.info(
        "brook %s serving %s; listening on %s://%s:%d with %s; ready",
        brook.__version__,
        where or "its storage",
        scheme,
        shown,
        server.port,
        keys_note,
    )
    watch = asyncio.create_task(_stop_when_fenced(server.broker.fenced, stop))
    await stop.wait()
    watch.cancel()
    log.info("stopping: finishing requests in flight")
    await server.stop()


async def _stop_when_fenced(fenced: threading.Event, stop: asyncio.Event) -> None:
    """A broker that another has taken over can never write again: stop serving."""
    while not fenced.is_set():
        await asyncio.sleep(limits.fenced_check_s)
    log.error("another broker has taken the storage over; stopping")
    stop.set()
