"""Durability paid per round, not per partition (SPEC §0, issue 49).

64 threads append one 100-byte record per call to an embedded broker, spread over
1, 100, 1,000 and 10,000 topics (thread i writes topic (i + k * 64) mod N, k the call
count, so every round touches up to 64 partitions). Records/s, the ratio to one
topic in the same run, and fsyncs per acknowledged record (the write-ahead log's
syncs and the checkpoints' segment syncs, from the broker's own counters).
Then the restart after a clean stop with 10,000 topics, the files cached.

Run alone with `python -m benchmarks.spread` (appends to RESULTS.md), or as part of
`make bench`. BROOK_BENCH_SPREAD_SECONDS sets each run's length (default 6).
"""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from pathlib import Path

import brook
from benchmarks.run import machine, scratch

THREADS = 64
VALUE = b"v" * 100
SECONDS = float(os.environ.get("BROOK_BENCH_SPREAD_SECONDS", "6"))
TRIALS = int(os.environ.get("BROOK_BENCH_SPREAD_TRIALS", "3"))
SPREADS = [1, 100, 1_000, 10_000]
RESTART_TOPICS = 10_000
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


def restart(folder: Path) -> float:
    """Seconds to open a broker with RESTART_TOPICS topics after a clean stop."""
    start = time.perf_counter()
    with brook.open(str(folder)) as b:
        opened = time.perf_counter() - start
        assert len(b.topics()) >= RESTART_TOPICS
    return opened


def main() -> None:
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
    lines += [
        "",
        f"- Restart after a clean stop with {RESTART_TOPICS:,} topics (files cached): "
        f"median {statistics.median(restarts):.2f} s of {', '.join(f'{s:.2f}' for s in restarts)}.",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    with RESULTS.open("a") as out:
        out.write("\n" + report)


if __name__ == "__main__":
    main()
