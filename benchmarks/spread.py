"""Durability paid per round, not per partition (SPEC §0, issue 49).

64 threads append one 100-byte record per call to an embedded broker, spread over
1, 100, 1,000 and 10,000 topics (thread i writes topic (i + k * 64) mod N, k the call
count, so every round touches up to 64 partitions). Records/s, the ratio to one
topic in the same run, and fsyncs per acknowledged record (the write-ahead log's
syncs and the checkpoints' segment syncs, from the broker's own counters).
Then the restart after a clean stop with 10,000 topics, the files cached.

Also, each over one topic and over 1,000, in the same run:
- HTTP: wrk POSTs one raw record per request to `brook serve`, the topic chosen at
  random per request from the set; requests/s.
- S3 (moto's server over loopback): 64 threads as above on an embedded broker; records/s,
  PUTs per 1,000 records (the WAL's round chunks and the checkpoints' segment chunks,
  a last checkpoint included) and the append's latency p50/p99.
And the restart after kill -9 with the write-ahead log near its bound (64 MiB past the
last checkpoint, spread over 1,000 topics): seconds until the broker serves.

Run alone with `python -m benchmarks.spread` (appends to RESULTS.md), or as part of
`make bench`. BROOK_BENCH_SPREAD_SECONDS sets each run's length (default 6).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.s3server import CREDENTIALS, MotoServer

import brook
from benchmarks.run import machine, scratch
from benchmarks.server import brook_serve, stop
from brook import limits
from brook.storage.s3 import S3Storage

THREADS = 64
VALUE = b"v" * 100
SECONDS = float(os.environ.get("BROOK_BENCH_SPREAD_SECONDS", "6"))
TRIALS = int(os.environ.get("BROOK_BENCH_SPREAD_TRIALS", "3"))
SPREADS = [1, 100, 1_000, 10_000]
RESTART_TOPICS = 10_000
SLOW_CHECKPOINTS_MS = 30_000
"""A checkpoint interval for object storage where PUTs are the cost that matters."""
RESULTS = Path(__file__).parent / "RESULTS.md"


def _fsyncs(b: brook.Broker) -> int:
    stats = b.commit_stats()
    return int(stats.syncs + getattr(stats, "checkpoint_syncs", 0))


def spread(topics: int, folder: Path) -> tuple[float, float]:
    """Records/s and fsyncs per record with `topics` topics (made beforehand)."""
    with brook.open(str(folder)) as b:
        handles = [b.topic(f"t{i:05d}") for i in range(topics)]
        for t in handles:
            t.append(b"warm-up")
        counts = [0] * THREADS
        stop = threading.Event()

        def produce(i: int) -> None:
            k = 0
            while not stop.is_set():
                handles[(i + k * THREADS) % topics].append(VALUE)
                k += 1
            counts[i] = k

        syncs_before = _fsyncs(b)
        threads = [threading.Thread(target=produce, args=(i,)) for i in range(THREADS)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(SECONDS)
        stop.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        records = sum(counts)
        # What the run's records will cost to checkpoint is part of their price.
        flush = getattr(b, "checkpoint", None)
        if flush is not None:
            flush()
        syncs = _fsyncs(b) - syncs_before
    return records / elapsed, syncs / max(records, 1)


def http(topics: int) -> float:
    """Requests/s of wrk POSTing one raw record per request over `topics` topics."""
    folder = scratch()
    with brook.open(str(folder)) as b:
        for i in range(topics):
            b.topic(f"t{i:05d}").append(b"warm-up")
    process, port = brook_serve(folder)
    try:
        script = folder / "spread.lua"
        script.write_text(
            f"math.randomseed(os.time())\n"
            f"request = function()\n"
            f'  local path = string.format("/v1/topics/t%05d/records", math.random(0, {topics - 1}))\n'
            f'  return wrk.format("POST", path, {{["Content-Type"] = "application/octet-stream"}}, "{"v" * 100}")\n'
            f"end\n"
        )
        out = subprocess.run(
            [
                "wrk",
                "-t2",
                f"-c{THREADS}",
                f"-d{SECONDS:.0f}s",
                "-s",
                str(script),
                f"http://127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        if "Non-2xx" in out:
            raise RuntimeError(f"wrk saw errors:\n{out}")
        return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    finally:
        stop(process)
        shutil.rmtree(folder)


def on_s3(
    moto: MotoServer,
    topics: int,
    wal: bool,
    interval_ms: int = limits.checkpoint_interval_ms_default,
) -> tuple[float, float, float, float]:
    """(records/s, PUTs per 1,000 records, ack p50 ms, ack p99 ms) on S3."""
    with brook.open(
        moto.fresh_url(),
        endpoint_url=moto.endpoint,
        checkpoint_interval_ms=interval_ms,
        write_ahead_log=wal,
    ) as b:
        storage = b.storage
        assert isinstance(storage, S3Storage)
        handles = [b.topic(f"t{i:05d}") for i in range(topics)]
        for t in handles:
            t.append(b"warm-up")
        b.core.checkpoint()
        stop_flag = threading.Event()
        latencies: list[list[float]] = [[] for _ in range(THREADS)]

        def produce(i: int) -> None:
            k = 0
            while not stop_flag.is_set():
                started = time.perf_counter()
                handles[(i + k * THREADS) % topics].append(VALUE)
                latencies[i].append(time.perf_counter() - started)
                k += 1

        puts = storage.bucket.counts.requests["put"]
        threads = [threading.Thread(target=produce, args=(i,)) for i in range(THREADS)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(SECONDS)
        stop_flag.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        b.core.checkpoint()  # what the run's records cost to store in their segments
        puts = storage.bucket.counts.requests["put"] - puts
    every = sorted(x for each in latencies for x in each)
    records = len(every)
    return (
        records / elapsed,
        puts / records * 1000,
        1000 * every[len(every) // 2],
        1000 * every[int(len(every) * 0.99)],
    )


KILLED_WRITER = """
import sys, brook
b = brook.open(sys.argv[1], checkpoint_interval_ms=600_000)
b.core.committer.checkpointer.wal_bytes_trigger = 1 << 40  # let the WAL fill to its bound
value = bytes(1000)
for round_ in range(int(sys.argv[2])):
    for i in range(1000):
        b.topic(f"t{i:05d}").append_many([brook.Record(value)] * 4)
print("READY", b.core.committer.wal.bytes_since_checkpoint, flush=True)
import time; time.sleep(600)
"""


def restart_after_kill() -> tuple[float, float]:
    """(MiB of WAL past the checkpoint, seconds to open) after kill -9 of a writer."""
    folder = scratch()
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(folder), "15"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline().split()
    assert line and line[0] == "READY", line
    child.send_signal(signal.SIGKILL)
    child.wait()
    started = time.perf_counter()
    with brook.open(str(folder)) as b:
        opened = time.perf_counter() - started
        assert b.topic("t00000").end_offsets()[0] >= 60
    shutil.rmtree(folder)
    return int(line[1]) / 2**20, opened


def restart(folder: Path) -> float:
    """Seconds to open a broker with RESTART_TOPICS topics after a clean stop."""
    start = time.perf_counter()
    with brook.open(str(folder)) as b:
        opened = time.perf_counter() - start
        assert len(b.topics()) >= RESTART_TOPICS
    return opened


def main() -> str:
    load_before = os.getloadavg()
    folders = {n: scratch() for n in SPREADS}
    runs: dict[int, list[tuple[float, float]]] = {n: [] for n in SPREADS}
    for _ in range(TRIALS):
        for n in SPREADS:  # interleaved, so drift touches every spread alike
            runs[n].append(spread(n, folders[n]))
            print(f"{n} topics: {runs[n][-1][0]:,.0f} records/s", flush=True)
    restarts = [restart(folders[RESTART_TOPICS]) for _ in range(3)]
    for folder in folders.values():
        shutil.rmtree(folder)
    served: dict[int, list[float]] = {1: [], 1_000: []}
    s3_runs = {
        "1 topic": (1, False, limits.checkpoint_interval_ms_default),
        "1,000 topics": (1_000, False, limits.checkpoint_interval_ms_default),
        "1 topic, WAL": (1, True, limits.checkpoint_interval_ms_default),
        "1,000 topics, WAL": (1_000, True, limits.checkpoint_interval_ms_default),
        f"1,000 topics, WAL, checkpoints every {SLOW_CHECKPOINTS_MS // 1000} s": (
            1_000,
            True,
            SLOW_CHECKPOINTS_MS,
        ),
    }
    stored: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in s3_runs}
    os.environ.update(CREDENTIALS)
    moto = MotoServer()
    try:
        for _ in range(TRIALS):
            for n in served:
                served[n].append(http(n))
                print(f"{n} topics: HTTP {served[n][-1]:,.0f}/s", flush=True)
            for name, (n, wal, interval) in s3_runs.items():
                stored[name].append(on_s3(moto, n, wal, interval))
                print(f"S3 {name}: {stored[name][-1]}", flush=True)
    finally:
        moto.close()
    killed = [restart_after_kill() for _ in range(3)]
    rate = {n: statistics.median(r for r, _ in runs[n]) for n in SPREADS}
    per_record = {n: statistics.median(s for _, s in runs[n]) for n in SPREADS}
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Spread over topics (durability per round) — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}.",
        f"- {THREADS} threads, one 100-byte record per append call, embedded broker on local disk, "
        f"defaults; {SECONDS:.0f} s per run, {TRIALS} runs per spread interleaved; median shown.",
        "",
        "| topics | records/s | runs | vs 1 topic | fsyncs per record |",
        "| ---: | ---: | --- | ---: | ---: |",
    ]
    for n in SPREADS:
        shown = ", ".join(f"{r:,.0f}" for r, _ in runs[n])
        lines.append(
            f"| {n:,} | {rate[n]:,.0f} | {shown} | {rate[n] / rate[1]:.2f}x | {per_record[n]:.3f} |"
        )
    http_rate = {n: statistics.median(v) for n, v in served.items()}
    s3 = {k: [statistics.median(run[i] for run in v) for i in range(4)] for k, v in stored.items()}
    lines += [
        "",
        f"- HTTP, one raw record per request, wrk with {THREADS} connections: "
        + "; ".join(
            f"{n:,} topic(s) {http_rate[n]:,.0f} requests/s ({', '.join(f'{r:,.0f}' for r in served[n])})"
            for n in served
        )
        + f": 1,000 topics at {http_rate[1_000] / http_rate[1]:.2f}x one.",
        "",
        "| S3 (moto, loopback), 64 threads x one 100-byte record | records/s | PUTs per 1,000 records | ack p50 / p99 ms |",
        "| --- | ---: | ---: | --- |",
    ]
    for name, row in s3.items():
        lines.append(f"| {name} | {row[0]:,.0f} | {row[1]:.1f} | {row[2]:.1f} / {row[3]:.1f} |")
    lines += [
        "",
        "- S3 PUTs per 1,000 records over 1,000 topics against one topic: "
        f"{s3['1,000 topics'][1] / s3['1 topic'][1]:.2f}x without the WAL, "
        f"{s3['1,000 topics, WAL'][1] / s3['1 topic, WAL'][1]:.2f}x with it "
        f"(checkpoints every 5 s, each PUTting every partition written since the last), "
        f"{s3[f'1,000 topics, WAL, checkpoints every {SLOW_CHECKPOINTS_MS // 1000} s'][1] / s3['1 topic, WAL'][1]:.2f}x "
        f"with checkpoints every {SLOW_CHECKPOINTS_MS // 1000} s. (Each run's records pay a last checkpoint.)",
        f"- Restart after a clean stop with {RESTART_TOPICS:,} topics (files cached): "
        f"median {statistics.median(restarts):.2f} s of {', '.join(f'{s:.2f}' for s in restarts)}.",
        "- Restart after kill -9 with "
        + ", ".join(f"{mib:.0f} MiB" for mib, _ in killed)
        + " of WAL past the checkpoint over 1,000 topics: "
        + ", ".join(f"{s:.2f} s" for _, s in killed)
        + " to serve.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    report = main()
    print(report)
    with RESULTS.open("a") as out:
        out.write("\n" + report)
