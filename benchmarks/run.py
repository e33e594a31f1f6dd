"""`make bench`: the core log's throughput beside baselines measured in the same run.

Each scenario runs three times; the median is reported, and ratios are taken
between medians of the same run. Results are printed and appended to
benchmarks/RESULTS.md with the machine, settings and load average.
Scratch data goes to BROOK_BENCH_DIR (default: a temporary folder under ./.bench).
BROOK_BENCH_SKIP=spark,spark_s3 (for example) leaves sections out of a run.
"""

from __future__ import annotations

import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import brook
from brook.records import Record

TRIALS = 3
MB = 1_000_000
RECORD_1K = 1024
BATCH = 1000
BATCHES = 150
THREADS = 64
THREADED_SECONDS = 3.0
READ_RECORDS = 1_000_000


def scratch() -> Path:
    base = Path(os.environ.get("BROOK_BENCH_DIR", ".bench"))
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=base))


def payloads(size: int, count: int) -> list[bytes]:
    """Incompressible values: every record different random bytes."""
    blob = os.urandom(size * count)
    return [blob[i * size : (i + 1) * size] for i in range(count)]


# ------------------------------------------------------------------ scenarios


def raw_write_fsync_per_batch() -> float:
    """Baseline: os.write of the same bytes, one fdatasync per 1,000-record batch. MB/s."""
    values = payloads(RECORD_1K, BATCH)
    folder = scratch()
    fd = os.open(folder / "raw", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    start = time.perf_counter()
    for _ in range(BATCHES):
        os.write(fd, b"".join(values))
        os.fdatasync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    shutil.rmtree(folder)
    return BATCHES * BATCH * RECORD_1K / MB / elapsed


def brook_append_many() -> float:
    """Brook append_many of 1,000 x 1 KB, each call durable. MB/s."""
    records = [Record(v) for v in payloads(RECORD_1K, BATCH)]
    folder = scratch()
    with brook.open(str(folder)) as b:
        t = b.topic("bench")
        t.append_many(records)
        start = time.perf_counter()
        for _ in range(BATCHES):
            t.append_many(records)
        elapsed = time.perf_counter() - start
    shutil.rmtree(folder)
    return BATCHES * BATCH * RECORD_1K / MB / elapsed


def sqlite_wal_full() -> float:
    """SQLite as a log (WAL, synchronous=FULL), one transaction per 1,000 rows. MB/s."""
    values = payloads(RECORD_1K, BATCH)
    folder = scratch()
    db = sqlite3.connect(folder / "log.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE log (offset INTEGER PRIMARY KEY, value BLOB NOT NULL)")
    start = time.perf_counter()
    for _ in range(BATCHES):
        db.execute("BEGIN")
        db.executemany("INSERT INTO log (value) VALUES (?)", ((v,) for v in values))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    shutil.rmtree(folder)
    return BATCHES * BATCH * RECORD_1K / MB / elapsed


def persist_queue_file() -> float:
    """persist-queue's file Queue, chunksize 1,000 (it fsyncs once per chunk). MB/s."""
    import persistqueue

    values = payloads(RECORD_1K, BATCH)
    folder = scratch()
    queue = persistqueue.Queue(str(folder / "q"), chunksize=BATCH, tempdir=str(folder))
    batches = BATCHES // 5  # it is slow; fewer batches keep the run short
    start = time.perf_counter()
    for _ in range(batches):
        for value in values:
            queue.put(value)
    elapsed = time.perf_counter() - start
    shutil.rmtree(folder)
    return batches * BATCH * RECORD_1K / MB / elapsed


def fsync_per_record() -> float:
    """Baseline: one thread, os.write + fdatasync for every 1 KB record. Records/s."""
    value = os.urandom(RECORD_1K)
    folder = scratch()
    fd = os.open(folder / "raw", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < THREADED_SECONDS / 2:
        os.write(fd, value)
        os.fdatasync(fd)
        count += 1
    elapsed = time.perf_counter() - start
    os.close(fd)
    shutil.rmtree(folder)
    return count / elapsed


def brook_threads_single_append() -> float:
    """64 threads, each appending one 1 KB record at a time (group commit). Records/s."""
    values = payloads(RECORD_1K, THREADS)
    folder = scratch()
    counts = [0] * THREADS
    stop = threading.Event()
    with brook.open(str(folder)) as b:
        t = b.topic("bench")
        t.append(b"warm-up")

        def produce(i: int) -> None:
            value = values[i]
            while not stop.is_set():
                t.append(value)
                counts[i] += 1

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(THREADS)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(THREADED_SECONDS)
        stop.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
    shutil.rmtree(folder)
    return sum(counts) / elapsed


def thread_handoff_ceiling() -> float:
    """Baseline: 64 threads handing one token each to a waker thread and back, no I/O. Handoffs/s.

    The most one-record-per-call blocking appends from 64 Python threads can reach
    on this machine, whatever the broker does: each call needs its thread woken.
    """
    queue: list[threading.Lock] = []
    cond = threading.Condition()
    stop = threading.Event()
    counts = [0] * THREADS

    def producer(i: int) -> None:
        while not stop.is_set():
            token = threading.Lock()
            token.acquire()
            with cond:
                queue.append(token)
                if len(queue) >= THREADS:
                    cond.notify()
            token.acquire()
            counts[i] += 1

    def waker() -> None:
        nonlocal queue
        while not stop.is_set():
            with cond:
                while len(queue) < THREADS and not stop.is_set():
                    cond.wait(0.002)
                batch, queue = queue, []
            for token in batch:
                token.release()
        for token in queue:
            token.release()

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(THREADS)]
    wake = threading.Thread(target=waker)
    wake.start()
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(THREADED_SECONDS / 2)
    stop.set()
    elapsed = time.perf_counter() - start
    total = sum(counts)
    wake.join()
    for thread in threads:
        thread.join(timeout=1)
    return total / elapsed


def brook_sequential_read() -> float:
    """Sequential read of 1,000,000 records of 100 bytes, 10,000 per call. Records/s."""
    folder = scratch()
    records = [Record(v) for v in payloads(100, BATCH)]
    with brook.open(str(folder)) as b:
        t = b.topic("bench")
        for _ in range(READ_RECORDS // BATCH):
            t.append_many(records)
        start = time.perf_counter()
        offset = got = 0
        while True:
            batch = t.read(0, offset, 10_000)
            if not batch:
                break
            got += len(batch)
            offset = batch[-1].offset + 1
        elapsed = time.perf_counter() - start
    assert got == READ_RECORDS, got
    shutil.rmtree(folder)
    return got / elapsed


def brook_produce_and_consume() -> float:
    """One producer thread (append_many 1,000 x 1 KB) and one stream group polling at once. MB/s end to end."""
    records = [Record(v) for v in payloads(RECORD_1K, BATCH)]
    total = BATCHES * BATCH
    folder = scratch()
    with brook.open(str(folder)) as b:
        b.create_topic("bench")
        consumer = b.consumer("bench", "readers")

        def produce() -> None:
            t = b.topic("bench")
            for _ in range(BATCHES):
                t.append_many(records)

        producer = threading.Thread(target=produce)
        start = time.perf_counter()
        producer.start()
        received = 0
        while received < total:
            got = consumer.poll(max_records=10_000, timeout=1.0)
            received += sum(len(r.value) for r in got) // RECORD_1K
            consumer.commit()
        elapsed = time.perf_counter() - start
        producer.join()
    shutil.rmtree(folder)
    return total * RECORD_1K / MB / elapsed


# ------------------------------------------------------------------ report


def trials(group: list[tuple[str, Callable[[], float]]]) -> dict[str, list[float]]:
    """Run a group of scenarios TRIALS times, interleaved, so a baseline and the
    scenario it is compared with see the same machine (the disk here drifts)."""
    runs: dict[str, list[float]] = {name: [] for name, _ in group}
    for _ in range(TRIALS):
        for name, fn in group:
            runs[name].append(fn())
    return runs


def section_main(main: Callable[[], str]) -> None:
    """A suite run alone (`python -m benchmarks.NAME`): its section printed and added
    to RESULTS.md, as `make bench` adds it with the rest."""
    text = main()
    print(text)
    with Path(__file__).with_name("RESULTS.md").open("a") as results:
        results.write("\n" + text.strip("\n") + "\n")


def machine() -> str:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main() -> None:
    load_before = os.getloadavg()
    groups: list[list[tuple[str, Callable[[], float]]]] = [
        [
            ("raw_write_fsync_per_batch", raw_write_fsync_per_batch),
            ("brook_append_many", brook_append_many),
            ("sqlite_wal_full", sqlite_wal_full),
            ("persist_queue_file", persist_queue_file),
        ],
        [
            ("fsync_per_record", fsync_per_record),
            ("thread_handoff_ceiling", thread_handoff_ceiling),
            ("brook_threads_single_append", brook_threads_single_append),
        ],
        [("brook_sequential_read", brook_sequential_read)],
        [("brook_produce_and_consume", brook_produce_and_consume)],
    ]
    results: dict[str, tuple[float, list[float]]] = {}
    for group in groups:
        for name, runs_of in trials(group).items():
            results[name] = (statistics.median(runs_of), runs_of)
            print(
                f"{name}: median {results[name][0]:,.1f} of {[round(r, 1) for r in runs_of]}",
                flush=True,
            )
    med = {k: v[0] for k, v in results.items()}

    def runs(name: str) -> str:
        return ", ".join(f"{r:,.0f}" for r in results[name][1])

    rows = [
        (
            "append_many 1,000 x 1 KB, durable (MB/s)",
            "brook_append_many",
            ">= 250 MB/s and >= 0.75x raw",
            f"{med['brook_append_many'] / med['raw_write_fsync_per_batch']:.2f}x raw write+fdatasync ({med['raw_write_fsync_per_batch']:,.0f} MB/s)",
        ),
        (
            "  SQLite WAL synchronous=FULL, same batches (MB/s)",
            "sqlite_wal_full",
            "",
            f"Brook is {med['brook_append_many'] / med['sqlite_wal_full']:.1f}x SQLite",
        ),
        (
            "  persist-queue file Queue, chunksize 1,000 (MB/s)",
            "persist_queue_file",
            "",
            f"Brook is {med['brook_append_many'] / med['persist_queue_file']:.1f}x persist-queue",
        ),
        (
            "64 threads x append of one 1 KB record (records/s)",
            "brook_threads_single_append",
            ">= 50,000/s and >= 20x",
            f"{med['brook_threads_single_append'] / med['fsync_per_record']:.1f}x fsync-per-record ({med['fsync_per_record']:,.0f}/s)",
        ),
        (
            "  Python thread-handoff ceiling, 64 threads, no I/O (handoffs/s)",
            "thread_handoff_ceiling",
            "",
            f"Brook reaches {med['brook_threads_single_append'] / med['thread_handoff_ceiling']:.2f}x of it",
        ),
        (
            "sequential read, 100-byte records (records/s)",
            "brook_sequential_read",
            ">= 1,000,000/s",
            "",
        ),
        (
            "1 producer + 1 stream group polling, 1 KB (MB/s end to end)",
            "brook_produce_and_consume",
            ">= 166 MB/s",
            "",
        ),
    ]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Core log — {stamp}",
        "",
        f"- Machine: {machine()}; load average before the run {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}.",
        f"- Settings: defaults (linger_ms 2, batch_bytes_max 4 MiB, segment_bytes_max 128 MiB); {BATCHES} batches of {BATCH} per trial;"
        " incompressible values; every append durable (fdatasync) before it returns; baselines use fdatasync too.",
        f"- Each figure is the median of {TRIALS} trials in this run; ratios are between medians of this run.",
        "",
        "| scenario | median | trials | target | vs baseline |",
        "| --- | ---: | --- | --- | --- |",
    ]
    for title, key, target, ratio in rows:
        lines.append(f"| {title} | {med[key]:,.0f} | {runs(key)} | {target} | {ratio} |")
    report = "\n".join(lines) + "\n"
    print("\n" + report)
    import importlib

    skipped = {n for n in os.environ.get("BROOK_BENCH_SKIP", "").split(",") if n}
    sections = [
        "spread",
        "queues",
        "tasks",
        "canvas",
        "timers",
        "delivery",
        "tenants",
        "saas",
        "metrics",
        "ui",
        "overview",
        "flood",
        "server",
        "latency",
        "s3",
        "takeover",
        "spark",
        "spark_s3",
        "lake",
        "targets",
    ]
    needs_wrk = {"spread", "server", "s3", "takeover", "targets", "saas"}
    for name in sections:
        if name in skipped:
            print(f"{name}: skipped (BROOK_BENCH_SKIP)")
            continue
        if name in needs_wrk and not shutil.which("wrk"):
            print(f"{name}: skipped, wrk is not installed (make bench installs it)")
            continue
        section = importlib.import_module(f"benchmarks.{name}").main()
        print("\n" + section)
        report += "\n" + section
    out = Path(__file__).with_name("RESULTS.md")
    if not out.exists():
        out.write_text("# Benchmark results\n\nAppended by `make bench`; newest last.\n\n")
    with out.open("a") as f:
        f.write(report + "\n")
    shutil.rmtree(os.environ.get("BROOK_BENCH_DIR", ".bench"), ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
