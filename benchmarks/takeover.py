"""Ownership on S3: how long a take-over from a busy broker takes, how it grows with the
topics (each with a queue group) when the new owner opens them one at a time (the
baseline) and side by side, how much sooner it serves than it has opened them all (issue
51: logs and queue groups open on first use or in the background), the same on a local
directory of thousands of topics, and a cold start over thousands of unmerged chunks, read
one at a time (the baseline) and side by side.

On moto's server over loopback (tests/s3server.py); the cold start goes through the
test proxy adding S3-like latency to every request (tests/s3proxy.py). Run alone with
`python -m benchmarks.takeover` (appends to RESULTS.md), or as part of `make bench`.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.s3proxy import Fault, FaultyProxy
from tests.s3server import CREDENTIALS, MotoServer

import brook
from benchmarks.run import section_main
from brook.broker import Broker
from brook.errors import BrookError
from brook.storage.s3 import S3Storage

TRIALS = 3
CHUNKS = 1_000
LATENCY_S = 0.020
"""Added to every request in the cold start: an S3 GET's first byte, roughly."""


def take_over_busy(moto: MotoServer) -> float:
    """Seconds for `brook.open(take_over=True)` while 4 threads append one record per
    call to the owner (each append one chunk PUT) and another commits group positions."""
    url = moto.fresh_url()
    old = brook.open(url, endpoint_url=moto.endpoint, linger_ms=0)
    old.create_topic("t", partitions=2)
    old.topic("t").append(b"x")
    stop = threading.Event()

    def append() -> None:
        topic = old.topic("t")
        while not stop.is_set():
            try:
                topic.append(b"busy")
            except BrookError:
                return

    def commit() -> None:
        consumer = old.consumer("t", "g")
        while not stop.is_set():
            try:
                consumer.commit({0: 1})
            except BrookError:
                return

    threads = [threading.Thread(target=append) for _ in range(4)]
    threads.append(threading.Thread(target=commit))
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    started = time.perf_counter()
    new = brook.open(url, endpoint_url=moto.endpoint, take_over=True)
    elapsed = time.perf_counter() - started
    stop.set()
    for thread in threads:
        thread.join()
    with contextlib.suppress(BrookError):
        old.close()
    new.close()
    return elapsed


WHAT = (
    "all opened, one at a time, open_threads=1 (the baseline)",
    "all opened, 16 side by side",
    "serving (logs and groups opened later, or when called)",
)
MANY_TOPICS = 50
"""Topics (two partitions and a queue group each) of the take-over by topic count."""


def written_topics(moto: MotoServer, count: int) -> str:
    """A prefix with `count` topics of two partitions, each with a queue group that has
    leased and acked a record."""
    url = moto.fresh_url()
    with brook.open(url, endpoint_url=moto.endpoint, linger_ms=0) as b:
        for n in range(count):
            name = f"customer-{n}"
            b.create_topic(name, partitions=2)
            b.topic(name).append(b"x")
            queue = b.queue(name, "work")
            queue.ack(queue.lease(1, timeout=0))
    return url


def take_over_topics(proxy: FaultyProxy, url: str, side_by_side: bool) -> tuple[float, float]:
    """Seconds for a take-over (latency on every request) of a prefix whose owner is
    still open, until the new broker serves and until it has opened every topic's logs
    and every queue group in the background (what it waited for before it served, until
    issue 51); `side_by_side=False` opens one topic and group at a time."""
    old = brook.open(url, endpoint_url=proxy.endpoint)
    # A live owner has long opened everything: its background opening must not compete.
    assert old.core._opening_done.wait(300) and old.queues._opened_all.wait(300)
    started = time.perf_counter()
    storage = S3Storage(url, endpoint_url=proxy.endpoint, take_over=True)
    if not side_by_side:
        storage.open_threads = 1
    new = Broker(storage)
    serving = time.perf_counter() - started
    assert new.core._opening_done.wait(300) and new.queues._opened_all.wait(300)
    opened = time.perf_counter() - started
    with contextlib.suppress(BrookError):
        old.close()
    new.close()
    return serving, opened


LOCAL_TOPICS = 5_000
"""Topics of the start on a local directory (each with one record)."""


def local_start(folder: Path) -> tuple[float, float]:
    """Seconds until a broker on a directory of LOCAL_TOPICS topics serves, and until it
    has opened every topic's logs in the background (files in the kernel's cache)."""
    started = time.perf_counter()
    b = brook.open(folder)
    serving = time.perf_counter() - started
    assert b.core._opening_done.wait(300) and b.queues._opened_all.wait(300)
    opened = time.perf_counter() - started
    b.close()
    return serving, opened


def written_local(folder: Path) -> Path:
    with brook.open(folder) as b:
        for n in range(LOCAL_TOPICS):
            b.topic(f"customer-{n}").append(b"x")
    return folder


def written_unmerged(moto: MotoServer) -> str:
    """A prefix whose one partition is CHUNKS unmerged chunks (one per append)."""
    url = moto.fresh_url()
    storage = S3Storage(url, endpoint_url=moto.endpoint)
    storage.merger.close()
    with Broker(storage) as b:
        topic = b.topic("t")
        for _ in range(CHUNKS):
            topic.append(os.urandom(100))
    return url


def cold_start(proxy: FaultyProxy, url: str, side_by_side: bool) -> float:
    """Seconds from opening the prefix (empty disk, latency on every request) to reading
    its first record; `side_by_side=False` fetches one object at a time."""
    started = time.perf_counter()
    storage = S3Storage(url, endpoint_url=proxy.endpoint)
    if not side_by_side:
        storage.requests.shutdown()
        storage.requests = ThreadPoolExecutor(1)
    with Broker(storage) as b:
        assert b.topic("t").read(0, 0, 1)
        elapsed = time.perf_counter() - started
    return elapsed


def main() -> str:
    os.environ.update(CREDENTIALS)
    load_before = os.getloadavg()[0]
    moto = MotoServer()
    proxy = FaultyProxy(moto.port, lambda method, path: Fault(delay_s=LATENCY_S))
    try:
        takes = [take_over_busy(moto) for _ in range(TRIALS)]
        print("take-over of a busy broker (s):", takes, flush=True)
        by_count = {}
        for count in (2, MANY_TOPICS):
            topics_url = written_topics(moto, count)
            serial = [take_over_topics(proxy, topics_url, False) for _ in range(TRIALS)]
            parallel = [take_over_topics(proxy, topics_url, True) for _ in range(TRIALS)]
            by_count[count] = (
                [opened for _, opened in serial],
                [opened for _, opened in parallel],
                [serving for serving, _ in parallel],
            )
        print("take-over by topic count, one at a time / side by side (s):", by_count, flush=True)
        with tempfile.TemporaryDirectory() as scratch:
            local = written_local(Path(scratch))
            starts = [local_start(local) for _ in range(TRIALS)]
        print("local start, serving / all opened (s):", starts, flush=True)
        url = written_unmerged(moto)
        one = [cold_start(proxy, url, side_by_side=False) for _ in range(TRIALS)]
        many = [cold_start(proxy, url, side_by_side=True) for _ in range(TRIALS)]
        print("cold start, one at a time / side by side (s):", one, many, flush=True)
    finally:
        proxy.close()
        moto.close()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    def listed(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    ratio = statistics.median(one) / statistics.median(many)
    serial, parallel, serving = by_count[MANY_TOPICS]
    opening = statistics.median(serial) / statistics.median(parallel)
    served_sooner = statistics.median(parallel) / statistics.median(serving)
    return "\n".join(
        [
            f"## S3 ownership (issues 14, 51) — {stamp}",
            "",
            f"- moto's server on loopback, same 2 cores; load average before {load_before:.2f}; "
            f"medians of {TRIALS} trials. Cold start: {CHUNKS} unmerged chunks of one partition, "
            f"{LATENCY_S * 1000:.0f} ms added to every request by the test proxy, empty disk.",
            "",
            "| scenario | median | trials |",
            "| --- | ---: | --- |",
            f"| take-over while 4 threads append (a chunk each) and 1 commits positions: s "
            f"| {statistics.median(takes):.2f} | {listed(takes)} |",
            *[
                f"| take-over, {count} topics with a queue group each, {WHAT[i]}: s "
                f"| {statistics.median(runs):.2f} | {listed(runs)} |"
                for count, runs_of in by_count.items()
                for i, runs in enumerate(runs_of)
            ],
            f"| take-over of {MANY_TOPICS} topics, all opened, speed-up side by side "
            f"| {opening:.1f}x | |",
            f"| take-over of {MANY_TOPICS} topics, serving before all is opened, sooner by "
            f"| {served_sooner:.1f}x | |",
            f"| start on a local directory of {LOCAL_TOPICS:,} topics, every topic opened: s "
            f"| {statistics.median(o for _, o in starts):.2f} | {listed([o for _, o in starts])} |",
            f"| start on a local directory of {LOCAL_TOPICS:,} topics, serving: s "
            f"| {statistics.median(s for s, _ in starts):.2f} | {listed([s for s, _ in starts])} |",
            f"| cold start, one object at a time (the baseline): s | {statistics.median(one):.2f} "
            f"| {listed(one)} |",
            f"| cold start, 16 objects side by side: s | {statistics.median(many):.2f} "
            f"| {listed(many)} |",
            f"| cold start speed-up | {ratio:.1f}x | |",
            "",
        ]
    )


if __name__ == "__main__":
    section_main(main)
