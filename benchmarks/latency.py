"""Tail latency, stated: produce-to-ack p50/p99/p99.9 under a fixed offered load.

    python -m benchmarks.latency            (appended to RESULTS.md by `make bench`)

An open-loop generator (uvloop, 64 kept connections) sends requests at a fixed rate and
times each from when it was *due*, not from when a connection was free, so a stalled
server shows in the tail instead of slowing the load down (what a closed-loop tool such as
wrk hides: coordinated omission). The rates are 10%, 50% and 90% of the maximum the same
generator reaches against the same server (closed loop, every connection busy), measured
first in the same run. One durable 1 KB record per request, and JSON batches of 32 x 1 KB
text values, on local disk and on S3 (moto, with a proxy adding 20 ms to every request,
tests/s3proxy.py). Then a delivery's latency at light load: from the append to the
receiver, 200 records/s to one endpoint.
"""

from __future__ import annotations

import asyncio
import collections
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httptools
import msgspec
import uvloop

import brook
from benchmarks.run import machine
from benchmarks.server import brook_serve, scratch, start, stop

CONNECTIONS = 64
MAX_S = 5.0
LOAD_S = float(os.environ.get("BROOK_BENCH_LATENCY_S", "10"))
TRIALS = int(os.environ.get("BROOK_BENCH_TRIALS", "3"))
SHARES = (0.1, 0.5, 0.9)
TICK_S = 0.002
S3_LATENCY_S = 0.020


class _Connection(asyncio.Protocol):
    def __init__(self, done: Callable[[_Connection], None]) -> None:
        self.done = done
        self.transport: asyncio.Transport | None = None
        self.due = 0.0
        self.status = 0
        self._parser = httptools.HttpResponseParser(self)
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.ready.set_result(None)

    def data_received(self, data: bytes) -> None:
        self._parser.feed_data(data)

    def on_message_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.done(self)


class Generator:
    """Sends `request` (whole bytes) on CONNECTIONS kept connections."""

    def __init__(self, port: int, request: bytes) -> None:
        self.port = port
        self.request = request
        self.latencies: list[float] = []
        self.errors = 0
        self._idle: collections.deque[_Connection] = collections.deque()
        self._backlog: collections.deque[float] = collections.deque()
        self._closed_loop = False
        self._stop_at = 0.0

    def _done(self, connection: _Connection) -> None:
        now = time.perf_counter()
        self.latencies.append(now - connection.due)
        if connection.status >= 300:
            self.errors += 1
        if self._closed_loop:
            if now < self._stop_at:
                self._send(connection, now)
            return
        if self._backlog:
            self._send(connection, self._backlog.popleft())
        else:
            self._idle.append(connection)

    def _send(self, connection: _Connection, due: float) -> None:
        connection.due = due
        assert connection.transport is not None
        connection.transport.write(self.request)

    async def _connect(self) -> list[_Connection]:
        loop = asyncio.get_running_loop()
        connections = []
        for _ in range(CONNECTIONS):
            _, connection = await loop.create_connection(
                lambda: _Connection(self._done), "127.0.0.1", self.port
            )
            connections.append(connection)
        return connections

    async def most(self, seconds: float) -> float:
        """Requests/s with every connection busy all the time (closed loop)."""
        connections = await self._connect()
        self._closed_loop = True
        started = time.perf_counter()
        self._stop_at = started + seconds
        for connection in connections:
            self._send(connection, started)
        await asyncio.sleep(seconds + 0.5)
        count = len(self.latencies)
        self._close(connections)
        return count / seconds

    async def offered(self, rate: float, seconds: float) -> list[float]:
        """Latencies (s) of requests due at `rate` per second for `seconds`."""
        connections = await self._connect()
        self._idle.extend(connections)
        started = time.perf_counter()
        sent = 0
        total = int(rate * seconds)
        while sent < total:
            now = time.perf_counter()
            due_now = min(total, int((now - started) * rate) + 1)
            while sent < due_now:
                due = started + sent / rate
                if self._idle:
                    self._send(self._idle.popleft(), due)
                else:
                    self._backlog.append(due)
                sent += 1
            # Due requests go out in small bursts, each timed from its own due time. (A
            # sleep under uvloop's 1 ms resolution spins: the generator took a core.)
            await asyncio.sleep(TICK_S)
        deadline = time.perf_counter() + 30
        while len(self.latencies) < total and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        self._close(connections)
        return self.latencies

    @staticmethod
    def _close(connections: list[_Connection]) -> None:
        for connection in connections:
            if connection.transport is not None:
                connection.transport.close()


def _request(path: str, content_type: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


REQUESTS = {
    "one 1 KB record per request": _request(
        "/v1/topics/latency/records", "application/octet-stream", os.urandom(1024)
    ),
    "JSON batches of 32 x 1 KB": _request(
        "/v1/topics/latency/records",
        "application/json",
        msgspec.json.encode({"records": [{"value": "x" * 1024} for _ in range(32)]}),
    ),
}


def _percentile(sorted_values: list[float], share: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(share * len(sorted_values)))]


def _measure(port: int, request: bytes) -> dict[Any, Any]:
    """The maximum, then p50/p99/p99.9 (ms) at each share of it."""

    async def run() -> dict[Any, Any]:
        top = await Generator(port, request).most(MAX_S)
        found: dict[Any, Any] = {"max": top}
        for share in SHARES:
            generator = Generator(port, request)
            latencies = sorted(await generator.offered(top * share, LOAD_S))
            found[share] = {
                "rate": len(latencies) / LOAD_S,
                "p50": _percentile(latencies, 0.5) * 1000,
                "p99": _percentile(latencies, 0.99) * 1000,
                "p999": _percentile(latencies, 0.999) * 1000,
                "errors": generator.errors,
            }
        return found

    return uvloop.run(run())


def local(request: bytes) -> dict[Any, Any]:
    folder = scratch()
    process, port = brook_serve(folder / "data")
    try:
        return _measure(port, request)
    finally:
        stop(process)
        shutil.rmtree(folder, ignore_errors=True)


def on_s3(request: bytes) -> dict[Any, Any]:
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from tests.s3proxy import Fault, FaultyProxy
    from tests.s3server import CREDENTIALS, MotoServer

    os.environ.update(CREDENTIALS)
    moto = MotoServer()
    proxy = FaultyProxy(moto.port, lambda method, path: Fault(delay_s=S3_LATENCY_S))
    folder = scratch()
    process, port = start(
        [
            *(sys.executable, "-m", "brook.cli", "serve", "--storage", moto.fresh_url()),
            *("--endpoint-url", proxy.endpoint, "--cache-dir", str(folder / "cache")),
            *("--port", "0"),
        ],
        r"listening on http://127\.0\.0\.1:(\d+) ",
    )
    try:
        return _measure(port, request)
    finally:
        stop(process)
        proxy.close()
        moto.close()
        shutil.rmtree(folder, ignore_errors=True)


def delivery(rate: float = 200, seconds: float = 10) -> dict[str, float]:
    """From the append to the receiver (ms), `rate` records/s to one endpoint."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from tests.delivery.receivers import Receiver, wait_for

    folder = scratch()
    total = int(rate * seconds)
    try:
        with (
            Receiver() as receiver,
            brook.open(str(folder / "data"), delivery_allow_private_networks=True) as b,
        ):
            b.create_endpoint("hook", receiver.url, ["events"])
            topic = b.topic("events")
            started = time.monotonic()
            for n in range(total):
                pause = started + n / rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                topic.append(repr(time.monotonic()).encode())
            wait_for(lambda: len(receiver.requests()) >= total, 60)
            latencies = sorted((g.at - float(g.body)) * 1000 for g in receiver.requests())
            return {
                "p50": _percentile(latencies, 0.5),
                "p99": _percentile(latencies, 0.99),
                "p999": _percentile(latencies, 0.999),
            }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _median_of(trials: list[dict[Any, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {"max": statistics.median(t["max"] for t in trials)}
    for share in SHARES:
        out[share] = {
            key: statistics.median(t[share][key] for t in trials)
            for key in ("rate", "p50", "p99", "p999", "errors")
        }
    return out


def main() -> str:
    load_before = os.getloadavg()
    rows = []
    for where, measure in (("local disk", local), ("S3 (+20 ms a request)", on_s3)):
        for what, request in REQUESTS.items():
            found = _median_of([measure(request) for _ in range(TRIALS)])
            records = 32 if what.startswith("JSON") else 1
            for share in SHARES:
                at = found[share]
                rows.append(
                    f"| {where} | {what} | {share:.0%} of {found['max']:,.0f} req/s "
                    f"({at['rate'] * records:,.0f} records/s) | {at['p50']:.2f} | "
                    f"{at['p99']:.2f} | {at['p999']:.2f} | {at['errors']:.0f} |"
                )
    hops = [delivery() for _ in range(TRIALS)]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return "\n".join(
        [
            f"## Tail latency — {stamp}",
            "",
            f"- Machine: {machine()}; load average before {load_before[0]:.2f}, after "
            f"{os.getloadavg()[0]:.2f}. `python -m benchmarks.latency`.",
            f"- Open loop: {CONNECTIONS} kept connections, requests due at a fixed rate for "
            f"{LOAD_S:.0f} s, each timed from when it was due (a stall shows in the tail). "
            f"The maximum is the same generator's with every connection busy ({MAX_S:.0f} s); "
            f"medians of {TRIALS} trials of each figure. Every request is answered once its "
            "records are durable (fdatasync on local disk; a 200 OK from S3).",
            "",
            "| storage | requests | offered load | p50 ms | p99 ms | p99.9 ms | non-2xx |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            "Delivery, from the append (embedded broker) to the receiver (one endpoint, "
            "200 records/s): p50 "
            + ", ".join(f"{h['p50']:.1f}" for h in hops)
            + " ms; p99 "
            + ", ".join(f"{h['p99']:.1f}" for h in hops)
            + " ms; p99.9 "
            + ", ".join(f"{h['p999']:.1f}" for h in hops)
            + " ms (trials).",
        ]
    )


if __name__ == "__main__":
    print(main())
