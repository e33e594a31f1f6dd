"""The object-storage benchmarks: Brook on moto's S3 server over loopback.

- 64 producer threads appending one 1 KB record per call to an embedded broker on
  S3, with batch windows (linger_ms) of 5, 10 and 50 ms: records/s and PUTs per
  1,000 records.
- Through `brook serve --storage` with 50 ms added to every S3 request (a proxy,
  modelling a real region): records/s of binary batches under wrk.
- Cold start: a broker on an empty disk opening a prefix that holds 10,000 batch
  objects, until its first read is served.

The proxy and moto's server are the ones the tests use (tests/s3proxy.py,
tests/s3server.py), so a benchmark and a test see the same components.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import threading
import time

from tests.s3proxy import Fault, FaultyProxy
from tests.s3server import CREDENTIALS, MotoServer

import brook
from benchmarks.server import scratch, start, stop, wrk
from brook.codec import encode_batch
from brook.codec.batch import Columns
from brook.storage.s3 import S3Storage

TRIALS = 3
PRODUCERS = 64
SECONDS = 5.0


def producers_on_s3(moto: MotoServer, linger_ms: float) -> tuple[float, float]:
    """(records/s, PUTs per 1,000 records) of 64 threads appending one 1 KB record per call."""
    with brook.open(moto.fresh_url(), endpoint_url=moto.endpoint, linger_ms=linger_ms) as b:
        storage = b.storage
        assert isinstance(storage, S3Storage)
        topic = b.topic("bench")
        topic.append(b"warm up")
        value = os.urandom(1024)
        done = threading.Event()
        counts = [0] * PRODUCERS

        def produce(i: int) -> None:
            while not done.is_set():
                topic.append(value)
                counts[i] += 1

        puts_before = storage.bucket.counts.requests["put"]
        threads = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(SECONDS)
        done.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        records = sum(counts)
        puts = storage.bucket.counts.requests["put"] - puts_before
    return records / elapsed, puts / records * 1000


def served_with_latency(moto: MotoServer, latency_s: float) -> float:
    """Records/s of binary batches of 100 x 1 KB through brook serve, S3 50 ms away."""
    proxy = FaultyProxy(moto.port, lambda method, path: Fault(delay_s=latency_s))
    folder = scratch()
    body = folder / "batch.bin"
    records = [os.urandom(1024) for _ in range(100)]
    body.write_bytes(b"".join(encode_batch(0, 0, Columns(records))))
    process, port = start(
        [
            sys.executable,
            "-m",
            "brook.cli",
            "serve",
            "--storage",
            moto.fresh_url(),
            "--endpoint-url",
            proxy.endpoint,
            "--cache-dir",
            str(folder / "cache"),
            "--port",
            "0",
        ],
        r"listening on http://127\.0\.0\.1:(\d+) ",
    )
    try:
        rate = wrk(
            f"http://127.0.0.1:{port}/v1/topics/bench/records", body, "application/vnd.brook.batch"
        )
        return rate * len(records)
    finally:
        stop(process)
        proxy.close()
        shutil.rmtree(folder)


def cold_start(moto: MotoServer, objects: int = 10_000) -> tuple[float, int, int]:
    """Seconds from opening, on an empty disk, a prefix written as `objects` batch
    objects to its first read; with the objects the prefix holds by then (merging
    has folded the small ones into runs) and the requests the start made."""
    url = moto.fresh_url()
    with brook.open(url, endpoint_url=moto.endpoint) as b:
        topic = b.topic("bench")
        value = os.urandom(100)
        for _ in range(objects):
            topic.append(value)  # one sync, so one batch object, each
        storage = b.storage
        assert isinstance(storage, S3Storage)
        held = len(storage.bucket.list(""))
    folder = scratch()
    started = time.perf_counter()
    with brook.open(url, endpoint_url=moto.endpoint, cache_dir=str(folder / "cache")) as b:
        first = b.topic("bench").read(0, objects // 2, 1)
        elapsed = time.perf_counter() - started
        assert first and first[0].offset == objects // 2
        storage = b.storage
        assert isinstance(storage, S3Storage)
        requests = sum(storage.bucket.counts.requests.values())
    shutil.rmtree(folder)
    return elapsed, held, requests


def main() -> str:
    os.environ.update(CREDENTIALS)
    load_before = os.getloadavg()[0]
    moto = MotoServer()
    try:
        windows = (5.0, 10.0, 50.0)
        rates: dict[float, list[float]] = {w: [] for w in windows}
        puts: dict[float, list[float]] = {w: [] for w in windows}
        latency: list[float] = []
        for _ in range(TRIALS):
            for window in windows:
                rate, per_thousand = producers_on_s3(moto, window)
                rates[window].append(rate)
                puts[window].append(per_thousand)
                print(
                    f"s3 linger {window} ms: {rate:,.0f} records/s, {per_thousand:.1f} PUTs/1k",
                    flush=True,
                )
            latency.append(served_with_latency(moto, 0.050))
            print(f"s3 served, 50 ms latency: {latency[-1]:,.0f} records/s", flush=True)
        cold, held, requests = cold_start(moto)
        print(f"s3 cold start: {cold:.2f} s, {held} objects, {requests} requests", flush=True)
    finally:
        moto.close()

    def trials(values: list[float], digits: int = 0) -> str:
        return ", ".join(f"{v:,.{digits}f}" for v in values)

    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Object storage (S3 on moto's server) — {stamp}",
        "",
        f"- moto {_version('moto')} as a real HTTP server on loopback, on the same 2 cores as Brook; "
        f"{PRODUCERS} producer threads, 1 KB records, {SECONDS:.0f} s per trial; load average "
        f"before {load_before:.2f}. Durable: an append returns once S3 answered 200 OK.",
        "- Latency: a proxy adds 50 ms to every S3 request (tests/s3proxy.py); wrk posts binary "
        "batches of 100 records over 64 connections to `brook serve --storage`.",
        "",
        "| scenario | median | trials | target |",
        "| --- | ---: | --- | --- |",
    ]
    for window in windows:
        lines.append(
            f"| 64 producers, linger_ms {window:.0f}: records/s | {statistics.median(rates[window]):,.0f} "
            f"| {trials(rates[window])} | |"
        )
        lines.append(
            f"|   PUTs per 1,000 records | {statistics.median(puts[window]):.1f} "
            f"| {trials(puts[window], 1)} | |"
        )
    lines.append(
        f"| through the server, S3 50 ms away: records/s | {statistics.median(latency):,.0f} "
        f"| {trials(latency)} | >= 20,000 |"
    )
    lines.append(
        f"| cold start: a prefix written as 10,000 batch objects (now {held} objects after "
        f"merging), empty disk, open to first read (s; {requests} requests) | {cold:.2f} | | |"
    )
    return "\n".join(lines) + "\n"


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    print(main())
