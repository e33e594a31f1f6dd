"""HTTP connections to receivers: pooled per origin, within a global cap (SPEC §7, §11).

A pool per endpoint (what Brook had) made 1,000 endpoints on one receiver hold up to
16,000 connections, a descriptor each, and open new ones all the time. Here the
endpoints of one origin (scheme, host, port, as their URLs name it) share one pool
of at most `per_origin_max` connections, and all pools `connections_max`. The
scheduler starts attempts within those budgets (scheduler.py, first come first
served among an origin's endpoints), so an attempt rarely waits here; the slots
each request holds (its origin's, then one of all) bound what goes around the
scheduler too (an endpoint's test request).

Origins are keyed by the host as written, not by the address it resolves to:
connections are never shared across host names (a TLS connection was made for
one name), and within an origin a connection is reused only for the address it was
made to (client.py). An origin unused for `idle_s` is closed, so idle endpoints hold
no connection; pooled connections idle longer than limits.delivery_keepalive_s are not reused.

Only the event loop's thread uses this.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from brook import limits
from brook.delivery.client import Idle


class Origin:
    __slots__ = ("idle", "in_use", "slots", "used_s")

    def __init__(self, per_origin_max: int) -> None:
        self.idle = Idle()
        self.slots = asyncio.Semaphore(per_origin_max)
        self.in_use = 0
        self.used_s = time.monotonic()


class Origins:
    def __init__(
        self,
        connections_max: int = limits.delivery_connections_max_default,
        per_origin_max: int = limits.delivery_origin_connections_max,
        idle_s: float = limits.delivery_origin_idle_s,
    ) -> None:
        self.connections_max = connections_max
        self.per_origin_max = min(per_origin_max, connections_max)
        self.idle_s = idle_s
        self._slots: asyncio.Semaphore | None = None
        self._origins: dict[tuple[str, str, int], Origin] = {}

    def __len__(self) -> int:
        return len(self._origins)

    @asynccontextmanager
    async def session(self, scheme: str, host: str, port: int) -> AsyncIterator[Idle]:
        """The origin's idle connections, with a slot of the origin's and one of all
        held (waiting for them) until the block ends."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.connections_max)
        key = (scheme, host, port)
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = Origin(self.per_origin_max)
        origin.in_use += 1
        try:
            async with origin.slots, self._slots:
                origin.used_s = time.monotonic()
                yield origin.idle
        finally:
            origin.in_use -= 1
            origin.used_s = time.monotonic()

    async def close_idle(self) -> int:
        """Close the origins no attempt used for `idle_s`; how many."""
        deadline = time.monotonic() - self.idle_s
        idle = [k for k, o in self._origins.items() if not o.in_use and o.used_s < deadline]
        for key in idle:
            self._origins.pop(key).idle.close()
        return len(idle)

    async def close(self) -> None:
        origins, self._origins = self._origins, {}
        for origin in origins.values():
            origin.idle.close()
