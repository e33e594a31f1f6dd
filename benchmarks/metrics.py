"""/metrics at 10,000 endpoints (issue 50; SPEC §7: metrics per endpoint bounded).

`brook serve` on a data directory holding ENDPOINTS endpoints, made through the
embedded broker on topics named outright (one queue group each): the lines, bytes
and time of a scrape (GET /metrics on one connection after a warm-up, median of
SCRAPES), first with every endpoint idle, then with FAILING of them failing against a
receiver answering 500 (more than limits.metrics_endpoints_shown_max, so the cap
shows). Target: at 10,000 endpoints, <= 5,000 lines and <= 100 ms a scrape.

Run alone with `python -m benchmarks.metrics` (prints the section for RESULTS.md), or
as part of `make bench`. BROOK_BENCH_METRICS_ENDPOINTS and BROOK_BENCH_METRICS_FAILING
change the sizes (FAILING=0 measures the idle scrape alone).
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import brook
from benchmarks.delivery import receiver
from benchmarks.run import machine
from benchmarks.server import scratch, start, stop

ENDPOINTS = int(os.environ.get("BROOK_BENCH_METRICS_ENDPOINTS", "10000"))
FAILING = int(os.environ.get("BROOK_BENCH_METRICS_FAILING", "300"))
SCRAPES = 3
SETTLE_S = 10.0
"""A scrape waits this long after `brook serve` starts: the steady cost is the one that
matters (the start sweeps every endpoint, and looks at every topic for their groups)."""
LINES_MAX = 5_000
MS_MAX = 100


def fill(data: Path, failing_url: str) -> float:
    """ENDPOINTS endpoints, FAILING of them on topic `alerts` (to `failing_url`), the
    rest on `events`; the seconds it took."""
    started = time.monotonic()
    with brook.open(str(data), delivery_allow_private_networks=True) as b:
        b.create_topic("events")
        b.create_topic("alerts")
        for n in range(ENDPOINTS - FAILING):
            b.create_endpoint(f"customer-{n:05d}", f"https://customer-{n}.example/hook", ["events"])
            if n % 1000 == 999:
                print(f"metrics: {n + 1:,} endpoints made", file=sys.stderr, flush=True)
        for n in range(FAILING):
            b.create_endpoint(f"broken-{n:03d}", failing_url, ["alerts"])
    return time.monotonic() - started


def scrape(port: int) -> tuple[str, float]:
    """One GET /metrics: its text and the milliseconds it took."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    connection.request("GET", "/metrics")
    response = connection.getresponse()
    body = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    connection.close()
    assert response.status == 200, response.status
    return body.decode(), elapsed


class Scrapes(NamedTuple):
    lines: int
    bytes: int
    shown: int
    """Endpoints with series of their own."""
    left_out: float
    """Failing or chosen endpoints past the cap (nan before it existed)."""
    times_ms: list[float]


def scrapes(port: int) -> Scrapes:
    """A warm-up, then SCRAPES timed: what the last held, and how long each took."""
    scrape(port)
    times = []
    for _ in range(SCRAPES):
        text, ms = scrape(port)
        times.append(ms)
    shown = set(re.findall(r'^brook_delivery_in_flight\{endpoint="([^"]+)"', text, re.M))
    return Scrapes(
        lines=len(text.splitlines()),
        bytes=len(text.encode()),
        shown=len(shown),
        left_out=_value(text, "brook_delivery_endpoints_left_out"),
        times_ms=times,
    )


def _value(text: str, series: str) -> float:
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else float("nan")


def wait_failing(port: int, count: int, limit_s: float = 300) -> None:
    deadline = time.monotonic() + limit_s
    while _value(scrape(port)[0], 'brook_delivery_endpoints{state="failing"}') < count:
        assert time.monotonic() < deadline, f"{count} endpoints not failing in {limit_s} s"
        time.sleep(1)


def serve(data: Path) -> tuple[subprocess.Popen[str], int]:
    return start(
        [
            sys.executable, "-m", "brook.cli", "serve", "--data", str(data), "--port", "0",
            "--log-level", "info", "--delivery-allow-private-networks",
        ],
        r"listening on http://127\.0\.0\.1:(\d+) ",
    )  # fmt: skip


def main() -> str:
    folder = scratch()
    failing_receiver, failing_url = receiver(500)
    load = os.getloadavg()[0]
    try:
        created_s = fill(folder / "data", failing_url)
        process, port = serve(folder / "data")
        try:
            print("metrics: serving; scraping", file=sys.stderr, flush=True)
            time.sleep(SETTLE_S)
            rows = [("every endpoint idle", scrapes(port))]
            if FAILING:
                with brook.connect(f"http://127.0.0.1:{port}") as b:
                    b.topic("alerts").append(b"alert")
                wait_failing(port, FAILING)
                print(f"metrics: {FAILING} failing; scraping", file=sys.stderr, flush=True)
                rows.append((f"{FAILING:,} of them failing (500)", scrapes(port)))
        finally:
            stop(process)
    finally:
        stop(failing_receiver)
        shutil.rmtree(folder, ignore_errors=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    then = f"; then {FAILING:,} of them failing against a receiver answering 500" if FAILING else ""
    lines = [
        f"## /metrics at {ENDPOINTS:,} endpoints (issue 50) — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load:.2f}.",
        f"- `brook serve` (defaults, `metrics_endpoints` empty) on a data directory with "
        f"{ENDPOINTS:,} endpoints made through the embedded broker in {created_s:.0f} s, on "
        f"topics named outright (one queue group each), no record to deliver{then}. Each "
        f"scrape is GET /metrics on one connection, {SETTLE_S:.0f} s after the start and "
        f"after a warm-up; median of {SCRAPES}.",
        "",
        "| scenario | lines | bytes | endpoints with series of their own | left out (cap) "
        "| median ms | trials ms | target |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for title, found in rows:
        trials = ", ".join(f"{t:.0f}" for t in found.times_ms)
        lines.append(
            f"| {title} | {found.lines:,} | {found.bytes:,} | {found.shown:,} "
            f"| {found.left_out:,.0f} | {statistics.median(found.times_ms):.0f} | {trials} "
            f"| <= {LINES_MAX:,} lines, <= {MS_MAX} ms |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
