"""One attempt, as the receiver sees it: the address checked, the request signed and
sent, the answer read (SPEC §7: the request). No queue, no judging: a `Result`.

The broker's delivery loop uses a `Sender` directly (`delivery_workers = 0`, and the
embedded default) or through worker processes that each run one (workers.py), so the
HTTP work of attempts runs on another core than the broker's loop.

HTTP is client.py's (a POST on a kept connection, parsed by httptools):
connections pooled per origin within a global cap (pool.py), no redirects followed,
at most EXCERPT_BYTES_MAX of an answer kept. Every attempt resolves the endpoint's host and checks each address
(addresses.py) before it connects, and then connects to the address it checked.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ssl
import time

from brook import limits
from brook.delivery import addresses, client
from brook.delivery.endpoint import Endpoint
from brook.delivery.outcome import EXCERPT_BYTES_MAX, ErrorKind, Result, location_shown
from brook.delivery.pool import Origins
from brook.delivery.request import Target
from brook.durations import words
from brook.records import Record


class Sender:
    """Sends attempts on the running event loop's thread (only there)."""

    def __init__(
        self,
        resolver: addresses.Resolver,
        reach: addresses.Reach,
        connections_max: int = limits.delivery_connections_max_default,
    ) -> None:
        self.resolver = resolver
        self.reach = reach
        self.origins = Origins(connections_max)
        self._targets: dict[str, Target] = {}
        self._resolving = concurrent.futures.ThreadPoolExecutor(
            limits.delivery_resolver_threads, "brook-delivery-dns"
        )

    def target(self, endpoint: Endpoint) -> Target:
        """What every attempt to the endpoint shares, for its settings as they stand."""
        target = self._targets.get(endpoint.name)
        if target is None or target.endpoint is not endpoint:
            target = self._targets[endpoint.name] = Target(endpoint)
        return target

    def forget(self, name: str) -> None:
        self._targets.pop(name, None)

    async def send(
        self, endpoint: Endpoint, record: Record, attempt: int, message_id: str, now_ms: int
    ) -> Result:
        target = self.target(endpoint)
        started = time.monotonic()
        try:
            address = await self._pick(target)
        except addresses.Refused as exc:
            return Result(error=ErrorKind.ADDRESS, error_message=str(exc))
        except OSError as exc:
            return Result(
                error=ErrorKind.DNS, error_message=f"{target.host}: {exc.strerror or exc}"
            )
        timeout_s = endpoint.settings.timeout_ms / 1000
        try:
            async with self.origins.session(target.scheme, target.host, target.port) as idle:
                # Timed from here: the wait for a connection slot is not the endpoint's.
                started = time.monotonic()
                headers = target.headers_for(record, attempt, message_id, now_ms)
                answer = await client.post(
                    idle,
                    target.scheme,
                    target.host,
                    address,
                    target.port,
                    target.request_target,
                    headers,
                    record.value,
                    limits.delivery_connect_timeout_s_max,
                    EXCERPT_BYTES_MAX,
                    timeout_s,
                )
        except TimeoutError:
            return Result(
                error=ErrorKind.TIMEOUT,
                error_message=f"no answer within {words(endpoint.settings.timeout_ms)}",
                latency_ms=_ms_since(started),
            )
        except ssl.SSLError as exc:  # (ssl.CertificateError is one)
            return Result(
                error=ErrorKind.TLS, error_message=_first_line(exc), latency_ms=_ms_since(started)
            )
        except (client.ProtocolError, ValueError) as exc:
            return Result(
                error=ErrorKind.PROTOCOL,
                error_message=_first_line(exc),
                latency_ms=_ms_since(started),
            )
        except OSError as exc:
            return Result(
                error=ErrorKind.CONNECTION,
                error_message=_first_line(exc),
                latency_ms=_ms_since(started),
            )
        location = answer.location if 300 <= answer.status < 400 else None  # (201's: no use)
        return Result(
            status=answer.status,
            latency_ms=_ms_since(started),
            retry_after=answer.retry_after,
            excerpt=answer.excerpt,
            location=None if location is None else location_shown(location, endpoint.settings.url),
        )

    async def _pick(self, target: Target) -> str:
        """The address to connect to, checked (addresses.pick): a name is resolved
        again for every attempt, so one that later resolves to a private address is
        refused too; an address in the URL is checked once."""
        host, port = target.host, target.port
        if target.literal:
            if target.address is None:
                target.address = addresses.pick(host, port, self.resolver, self.reach)
            return target.address
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(self._resolving, self.resolver, host, port)
        return addresses.pick(host, port, lambda h, p: found, self.reach)

    async def close_idle(self) -> int:
        return await self.origins.close_idle()

    async def close(self) -> None:
        await self.origins.close()
        self._resolving.shutdown(wait=False, cancel_futures=True)


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
