"""The dashboard with a topic per customer and event type (issue 50: the overview took
0.9 s at 4,576 topics, refreshed every 5 s): each page's answer time through `brook
serve` on 5,000 topics and 1,000 endpoints, one per customer (target: the overview
within 100 ms). Baseline: /v1/health on the same server, the HTTP stack alone.

`python -m benchmarks.overview` (prints its section), or as part of `make bench`.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time

import brook
from benchmarks.run import machine
from benchmarks.server import brook_serve, scratch, stop
from benchmarks.ui import timed

CUSTOMERS = int(os.environ.get("BROOK_BENCH_OVERVIEW_CUSTOMERS", "1000"))
EVENT_TYPES = ("invoice.paid", "invoice.created", "user.created", "user.deleted", "user.updated")
PAGES = [
    "/ui",
    "/ui/topics/events.c0500.invoice.paid",
    "/ui/endpoints",
    "/ui/endpoints?state=failing",
    "/ui/endpoints?name=c0500",
    "/ui/endpoints/c0500",
    "/ui/queues",
    "/ui/groups",
]


def fill(data: str) -> None:
    """A customer's endpoint (pattern `events.c0042.*`, an address no one answers:
    its records wait) and five topics with one event each."""
    with brook.open(data, delivery_allow_private_networks=True) as b:
        for c in range(CUSTOMERS):
            name = f"c{c:04d}"
            for event_type in EVENT_TYPES:
                b.topic(f"events.{name}.{event_type}").append(b'{"n": 1}')
            b.create_endpoint(
                name, "http://127.0.0.1:9/hooks", topics=[f"events.{name}.*"], tenant=name
            )


def main() -> str:
    folder = scratch()
    try:
        started = time.monotonic()
        fill(str(folder / "data"))
        filled_s = time.monotonic() - started
        process, port = brook_serve(folder / "data")
        try:
            health = statistics.median(timed(port, "/v1/health"))
            rows = [
                (path, statistics.median(t), max(t)) for path in PAGES for t in [timed(port, path)]
            ]
        finally:
            stop(process)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    topics = CUSTOMERS * len(EVENT_TYPES)
    lines = [
        f"## The dashboard at {topics:,} topics and {CUSTOMERS:,} endpoints — {stamp}",
        "",
        f"- Machine: {machine()}; load average {os.getloadavg()[0]:.2f}.",
        f"- `brook serve` on a data directory with {CUSTOMERS:,} customers, each an endpoint "
        f"(pattern `events.cNNNN.*`, an address no one answers, so its records wait) and "
        f"{len(EVENT_TYPES)} topics of one event (filled in {filled_s:.0f} s). Each page asked "
        "20 times on one connection after two warm-ups.",
        f"- Baseline: `/v1/health` on the same server, {health:.2f} ms median.",
        "",
        "| page | median ms | slowest ms | target |",
        "| --- | ---: | ---: | --- |",
    ]
    for path, median, slowest in rows:
        target = "<= 100 ms" if path == "/ui" else ""
        lines.append(f"| `{path}` | {median:.1f} | {slowest:.1f} | {target} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
