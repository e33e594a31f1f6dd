"""Queue groups: lease + ack throughput, embedded and through the server, and a
retry storm, beside a job queue on SQLite measured in the same run.

Every lease and every ack is durable (its status entry fdatasynced) before the
call returns. Records are 1 KB; workers lease and ack in batches of 100.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import brook
from benchmarks.run import machine, payloads, scratch, section_main
from benchmarks.server import brook_serve, stop
from brook.records import Record

TRIALS = 3
JOBS = 100_000
BATCH = 100
WORKERS = 8
SERVER_JOBS = 150_000
"""Enough for a steady state: a run of 50,000 (1.5 s) was a third ramp-up and measured
0.6x to 0.8x of a longer one."""
SERVER_WORKERS = 16
SQLITE_JOBS = 20_000


def _committer(b: brook.Broker) -> Any:
    """The broker's committer (on `b.core` since issue 16; benchmarks.compare runs older
    versions too)."""
    return getattr(b, "core", b).committer


def _fill(topic: brook.Topic | brook.RemoteBroker, count: int) -> None:
    values = payloads(1024, 1000)
    for _ in range(count // 1000):
        topic.append_many([Record(v) for v in values])  # type: ignore[union-attr]


def _work(queue: object, count: int, workers: int, fail_first: bool = False) -> float:
    """Workers lease and settle until `count` records are acked; jobs/s."""
    done = [0]
    mutex = threading.Lock()

    def worker() -> None:
        while True:
            with mutex:
                if done[0] >= count:
                    return
            jobs = queue.lease(max_records=BATCH, timeout=0.5)  # type: ignore[attr-defined]
            if not jobs:
                continue
            if fail_first:
                failed = [j for j in jobs if j.attempt == 1 and j.record.offset % 2 == 0]
                good = [j for j in jobs if not (j.attempt == 1 and j.record.offset % 2 == 0)]
                if failed:
                    queue.nack(failed, delay_ms=0)  # type: ignore[attr-defined]
            else:
                good = jobs
            if good:
                queue.ack(good)  # type: ignore[attr-defined]
            with mutex:
                done[0] += len(good)

    return count / _seconds_of(worker, workers)


def _seconds_of(worker: Callable[[], None], threads: int) -> float:
    """How long `threads` threads running `worker` take to finish."""
    running = [threading.Thread(target=worker) for _ in range(threads)]
    started = time.perf_counter()
    for t in running:
        t.start()
    for t in running:
        t.join()
    return time.perf_counter() - started


def embedded(fail_first: bool = False) -> tuple[float, float]:
    """(jobs/s, fsyncs per job) with WORKERS threads on an embedded broker."""
    folder = scratch()
    try:
        with brook.open(str(folder / "data")) as b:
            _fill(b.topic("jobs"), JOBS)
            q = b.queue("jobs", "workers")
            syncs = _committer(b).stats.syncs
            rate = _work(q, JOBS, WORKERS, fail_first)
            per_job = (_committer(b).stats.syncs - syncs) / JOBS
            assert q.stats()["acked"] == JOBS
        return rate, per_job
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def served() -> float:
    """jobs/s of SERVER_WORKERS threads using brook.connect against `brook serve`."""
    folder = scratch()
    process, port = brook_serve(folder / "data")
    try:
        return served_work(port)
    finally:
        stop(process)
        shutil.rmtree(folder, ignore_errors=True)


def served_work(port: int) -> float:
    """jobs/s of SERVER_WORKERS threads using brook.connect against a running server."""
    with brook.connect(f"http://127.0.0.1:{port}") as b:
        _fill(b.topic("jobs"), SERVER_JOBS)
        q = b.queue("jobs", "workers")
        rate = _work(q, SERVER_JOBS, SERVER_WORKERS)
        assert q.stats()["acked"] == SERVER_JOBS
    return rate


def sqlite_job_queue() -> float:
    """The same work on a job table in SQLite (WAL, synchronous=FULL): lease 100 with
    one UPDATE ... RETURNING and ack them with another, each its own transaction,
    as a job queue on a SQL database does. One connection per worker."""
    folder = scratch()
    path = folder / "jobs.db"
    try:
        setup = sqlite3.connect(path)
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute(
            "CREATE TABLE jobs (id INTEGER PRIMARY KEY, state INTEGER, lease_until REAL, value BLOB)"
        )
        setup.execute("CREATE INDEX ready ON jobs (state, id)")
        values = payloads(1024, 1000)
        for _ in range(SQLITE_JOBS // 1000):
            setup.executemany(
                "INSERT INTO jobs (state, lease_until, value) VALUES (0, 0, ?)",
                [(v,) for v in values],
            )
        setup.commit()
        setup.close()
        done = [0]
        mutex = threading.Lock()

        def worker() -> None:
            db = sqlite3.connect(path, timeout=30, isolation_level=None)
            db.execute("PRAGMA synchronous=FULL")
            while True:
                with mutex:
                    if done[0] >= SQLITE_JOBS:
                        break
                db.execute("BEGIN IMMEDIATE")
                rows = db.execute(
                    "UPDATE jobs SET state = 1, lease_until = ? WHERE id IN "
                    "(SELECT id FROM jobs WHERE state = 0 ORDER BY id LIMIT ?) "
                    "RETURNING id, value",
                    (time.time() + 30, BATCH),
                ).fetchall()
                db.execute("COMMIT")
                if not rows:
                    continue
                ids = [r[0] for r in rows]
                db.execute("BEGIN IMMEDIATE")
                db.execute(
                    f"UPDATE jobs SET state = 2 WHERE id IN ({','.join('?' * len(ids))})", ids
                )
                db.execute("COMMIT")
                with mutex:
                    done[0] += len(ids)
            db.close()

        return SQLITE_JOBS / _seconds_of(worker, WORKERS)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> str:
    load_before = os.getloadavg()[0]
    runs: dict[str, list[float]] = {
        "embedded": [],
        "sqlite": [],
        "served": [],
        "storm": [],
        "storm_syncs": [],
        "plain_syncs": [],
    }
    steps: list[tuple[str, Callable[[], None]]] = [
        ("embedded", lambda: _keep(runs, "embedded", "plain_syncs", embedded())),
        ("sqlite", lambda: runs["sqlite"].append(sqlite_job_queue())),
        ("served", lambda: runs["served"].append(served())),
        ("storm", lambda: _keep(runs, "storm", "storm_syncs", embedded(fail_first=True))),
    ]
    for _ in range(TRIALS):
        for name, step in steps:
            step()
            print(f"queue {name}: {runs[name][-1]:,.0f} jobs/s", flush=True)
    med = {name: statistics.median(values) for name, values in runs.items() if values}

    def trials(name: str, digits: int = 0) -> str:
        return ", ".join(f"{v:,.{digits}f}" for v in runs[name])

    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return "\n".join(
        [
            f"## Queue groups — {stamp}",
            "",
            f"- Machine: {machine()}; load average before {load_before:.2f}, after "
            f"{os.getloadavg()[0]:.2f}.",
            f"- 1 KB records; leases and acks of {BATCH} at a time; every lease and ack durable "
            f"(fdatasync of its status entry) before it returns. Embedded: {JOBS:,} jobs, "
            f"{WORKERS} worker threads. Server: `brook serve` and {SERVER_WORKERS} threads using "
            f"brook.connect, {SERVER_JOBS:,} jobs. Medians of {TRIALS} trials, interleaved.",
            f"- Baseline: a job table in SQLite (WAL, synchronous=FULL), {WORKERS} connections, "
            f"lease {BATCH} with one UPDATE … RETURNING and ack them with another, "
            f"{SQLITE_JOBS:,} jobs.",
            "",
            "| scenario | median | trials | target | vs baseline |",
            "| --- | ---: | --- | --- | --- |",
            f"| embedded lease + ack (jobs/s) | {med['embedded']:,.0f} | {trials('embedded')} | "
            f">= 50,000 | {med['embedded'] / med['sqlite']:.1f}x SQLite |",
            f"|   fsyncs per job | {med['plain_syncs']:.3f} | {trials('plain_syncs', 3)} | | |",
            f"|   SQLite job table (jobs/s) | {med['sqlite']:,.0f} | {trials('sqlite')} | | |",
            f"| through the server, Python client (jobs/s) | {med['served']:,.0f} | "
            f"{trials('served')} | >= 20,000 | {med['served'] / med['sqlite']:.1f}x SQLite |",
            f"| retry storm: half the jobs nacked once (jobs/s) | {med['storm']:,.0f} | "
            f"{trials('storm')} | | {med['storm'] / med['embedded']:.2f}x no retries |",
            f"|   fsyncs per job | {med['storm_syncs']:.3f} | {trials('storm_syncs', 3)} | | |",
            "",
        ]
    )


def _keep(runs: dict[str, list[float]], rate: str, syncs: str, result: tuple[float, float]) -> None:
    runs[rate].append(result[0])
    runs[syncs].append(result[1])


if __name__ == "__main__":
    # This suite alone: `python -m benchmarks.queues` (make bench runs it with the rest).
    section_main(main)
