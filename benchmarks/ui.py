"""The dashboard on big data: each page's answer time through `brook serve` with a
million records in a topic and 100,000 dead records in a queue group (target: every
page within 200 ms). Baseline: /v1/health on the same server, the HTTP stack alone."""

from __future__ import annotations

import http.client
import os
import shutil
import statistics
import time

import brook
from benchmarks.run import machine
from benchmarks.server import brook_serve, scratch, stop

RECORDS = int(os.environ.get("BROOK_BENCH_UI_RECORDS", "1000000"))
DEAD = int(os.environ.get("BROOK_BENCH_UI_DEAD", "100000"))
REQUESTS = 20
ERRORS = [f"error kind {i}" for i in range(10)]
PAGES = [
    "/ui",
    "/ui/topics/big",
    f"/ui/topics/big?before={RECORDS // 2}",
    "/ui/topics/big?key=k7",
    "/ui/topics/big?key=absent",
    "/ui/groups",
    "/ui/queues",
    "/ui/queues/jobs/workers",
    "/ui/queues/jobs/workers?error=error%20kind%203",
    "/ui/queues/jobs/workers/redrive?error=error%20kind%203",
    "/ui/timers",
    "/ui/storage",
]


def fill(data: str) -> None:
    value = b"x" * 100
    with brook.open(data) as b:
        big = b.topic("big")
        for start in range(0, RECORDS, 10_000):
            big.append_many(
                [brook.Record(value, key=b"k%d" % (i % 100)) for i in range(start, start + 10_000)]
            )
        b.consumer("big", "readers").commit({0: RECORDS // 3})
        b.topic("jobs").append_many([brook.Record(b"job %d" % i) for i in range(DEAD)])
        queue = b.queue("jobs", "workers", max_attempts=1)
        left = DEAD
        while left:
            jobs = queue.lease(min(left, 5_000), timeout=1)
            for n, error in enumerate(ERRORS):
                part = jobs[n :: len(ERRORS)]
                if part:
                    queue.nack(part, reason=error)
            left -= len(jobs)


def timed(port: int, path: str) -> list[float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    times = []
    for n in range(REQUESTS + 2):
        started = time.perf_counter()
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        assert response.status == 200, (path, response.status)
        if n >= 2:  # the first two warm up (a cursor loaded, a template compiled)
            times.append((time.perf_counter() - started) * 1000)
    connection.close()
    return times


def main() -> str:
    folder = scratch()
    try:
        started = time.monotonic()
        fill(str(folder / "data"))
        filled_s = time.monotonic() - started
        process, port = brook_serve(folder / "data")
        try:
            health = statistics.median(timed(port, "/v1/health"))
            rows = []
            for path in PAGES:
                times = timed(port, path)
                rows.append((path, statistics.median(times), max(times)))
        finally:
            stop(process)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Dashboard pages on big data — {stamp}",
        "",
        f"- Machine: {machine()}; load average {os.getloadavg()[0]:.2f}.",
        f"- `brook serve` on a data directory with {RECORDS:,} records of 100 B in one topic "
        f"(100 keys), a stream group committed at a third, and a "
        f"queue group with {DEAD:,} dead records over {len(ERRORS)} errors (filled in "
        f"{filled_s:.0f} s). Each page asked {REQUESTS} times on one connection after two "
        "warm-ups.",
        f"- Baseline: `/v1/health` on the same server, {health:.2f} ms median.",
        "",
        "| page | median ms | slowest ms | target |",
        "| --- | ---: | ---: | --- |",
    ]
    for path, median, slowest in rows:
        lines.append(f"| `{path}` | {median:.1f} | {slowest:.1f} | <= 200 ms |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
