"""Tasks: no-op jobs a second with 1 and 2 `brook worker` processes through `brook serve`,
and enqueue-to-start latency at light load, beside RQ on Debian's redis-server and huey
on SQLite, measured on this machine in the same run (issue 35).

Throughput: N no-op jobs are enqueued first, then the workers start; the rate is taken
from the first job done to the last (worker start-up left out, for every system alike),
by polling what is left. Latency: one job at a time, 20 ms apart, to idle workers; each
job writes how long after its enqueue call began it started.

Keyed (issue 48), a realistic setting: `brook worker --concurrency 8 --processes 2` on
a task declared `concurrency_per_key=1`, its jobs spread over 500 keys (customers),
each a no-op or a 2 ms sleep standing for a call to another service; beside the same
no-op with no key limit. The same rate, and the CPU each process spent a job over it
(from /proc).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.run import machine, scratch
from benchmarks.server import brook_serve, stop

TRIALS = 3
BROOK_JOBS = 60_000
RQ_JOBS = 3_000
RQ_FORK_JOBS = 600
HUEY_JOBS = 6_000
LATENCY_JOBS = 200
LATENCY_GAP_S = 0.02
CONCURRENCY = int(os.environ.get("BENCH_CONCURRENCY", "128"))
"""Worker threads per process for the no-op jobs (Brook and huey)."""
KEYED_JOBS = 20_000
KEYS = 500
KEYED_CONCURRENCY = 8
KEYED_PROCESSES = 2
IO_MS = 2

BROOK_APP = """
import os, time
import brook

app = brook.App(os.environ["BROOK_URL"])


@app.task
def noop():
    return None


@app.task
def stamp(sent):
    with open(os.environ["LATENCY_FILE"], "a") as f:
        f.write(f"{time.time() - sent}\\n")
"""

KEYED_APP = f"""
import os, time
import brook

app = brook.App(os.environ["BROOK_URL"])


@app.task(concurrency_per_key=1)
def keyed_noop(order):
    return None


@app.task(concurrency_per_key=1)
def keyed_io(order):
    time.sleep({IO_MS / 1000})  # stands for a call to another service


@app.task
def unlimited_noop(order):
    return None
"""

PLAIN_TASKS = """
import os, time


def noop():
    return None


def stamp(sent):
    with open(os.environ["LATENCY_FILE"], "a") as f:
        f.write(f"{time.time() - sent}\\n")
"""

HUEY_APP = """
import os, time
from huey import SqliteHuey

huey = SqliteHuey(filename=os.environ["HUEY_DB"])


@huey.task()
def noop():
    return None


@huey.task()
def stamp(sent):
    with open(os.environ["LATENCY_FILE"], "a") as f:
        f.write(f"{time.time() - sent}\\n")
"""


def _env(folder: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]),
        "LATENCY_FILE": str(folder / "latency.txt"),
        **extra,
    }


def _rate(
    left: Callable[[], int],
    total: int,
    timeout_s: float = 300,
    on_first: Callable[[], object] = lambda: None,
) -> float:
    """Jobs/s from the first job done to the last, polling how many are left;
    `on_first` is called once the first is done."""
    deadline = time.monotonic() + timeout_s
    while left() >= total:
        if time.monotonic() > deadline:
            raise RuntimeError("no job was done")
        time.sleep(0.002)
    first, at_first = time.monotonic(), left()
    on_first()
    while (remaining := left()) > 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{remaining} jobs were never done")
        time.sleep(0.02)
    return at_first / (time.monotonic() - first)


def _latencies(folder: Path, enqueue: Callable[[float], None]) -> tuple[float, float]:
    """p50 and p99 ms of enqueue-to-start over LATENCY_JOBS jobs sent one at a time."""
    path = folder / "latency.txt"
    path.unlink(missing_ok=True)
    for _ in range(LATENCY_JOBS):
        enqueue(time.time())
        time.sleep(LATENCY_GAP_S)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = path.read_text().split() if path.exists() else []
        if len(lines) >= LATENCY_JOBS:
            break
        time.sleep(0.05)
    values = sorted(float(v) * 1000 for v in lines)
    if len(values) < LATENCY_JOBS:
        raise RuntimeError(f"only {len(values)} of {LATENCY_JOBS} latency jobs ran")
    return values[len(values) // 2], values[int(len(values) * 0.99) - 1]


def _stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ------------------------------------------------------------------ Brook


def brook_trial(processes: int) -> tuple[float, float, float]:
    """(no-op jobs/s, latency p50 ms, p99 ms) with `processes` worker processes."""
    folder = scratch().resolve()
    (folder / "bench_tasks.py").write_text(BROOK_APP)
    server, port = brook_serve(folder / "data")
    url = f"http://127.0.0.1:{port}"
    env = _env(folder, BROOK_URL=url)
    sys.path.insert(0, str(folder))
    os.environ["BROOK_URL"], os.environ["LATENCY_FILE"] = url, env["LATENCY_FILE"]
    import bench_tasks

    del os.environ["BROOK_URL"]  # read at import; later sections must not meet it

    workers: list[subprocess.Popen[bytes]] = []
    try:
        app = bench_tasks.app
        noop = app.tasks["noop"]
        for start in range(0, BROOK_JOBS, 1000):
            noop.enqueue_many([((), {})] * min(1000, BROOK_JOBS - start))
        queue = app.queue(noop.topic)
        command = [sys.executable, "-m", "brook.cli", "worker", "bench_tasks:app"]
        options = [
            "--concurrency",
            str(CONCURRENCY),
            "--log-level",
            os.environ.get("BENCH_WORKER_LOG", "warning"),
        ]
        workers = [
            subprocess.Popen([*command, *options], cwd=folder, env=env) for _ in range(processes)
        ]

        def left() -> int:
            stats = queue.stats()
            return BROOK_JOBS - stats["acked"]

        rate = _rate(left, BROOK_JOBS)
        stamp = app.tasks["stamp"]
        p50, p99 = _latencies(folder, lambda sent: stamp.enqueue(sent))
        app.close()
        return rate, p50, p99
    finally:
        _stop_all(workers)
        stop(server)
        sys.modules.pop("bench_tasks", None)
        sys.path.remove(str(folder))
        shutil.rmtree(folder, ignore_errors=True)


def keyed_trial(task_name: str) -> tuple[float, float, float]:
    """(jobs/s, server CPU us a job, workers' CPU us a job) of KEYED_JOBS jobs of
    `task_name` over KEYS keys, run by `brook worker --concurrency KEYED_CONCURRENCY
    --processes KEYED_PROCESSES`."""
    folder = scratch().resolve()
    (folder / "bench_keyed.py").write_text(KEYED_APP)
    server, port = brook_serve(folder / "data")
    url = f"http://127.0.0.1:{port}"
    env = _env(folder, BROOK_URL=url)
    sys.path.insert(0, str(folder))
    os.environ["BROOK_URL"] = url
    import bench_keyed

    del os.environ["BROOK_URL"]
    workers: list[subprocess.Popen[bytes]] = []
    try:
        app = bench_keyed.app
        task = app.tasks[task_name]
        # The group's settings as the worker declares them, before any job is leased.
        queue, _ = app.claim_queue(task.topic)
        expected = task.settings["concurrency_per_key"]
        assert queue.settings().get("concurrency_per_key") == expected, queue.settings()
        # One batch per key; the broker leases keys round-robin (queue/fair.py), so
        # the order in the log does not matter.
        per_key = KEYED_JOBS // KEYS
        for k in range(KEYS):
            calls = [((f"order-{k}-{n}",), {}) for n in range(per_key)]
            task.options(key=f"customer-{k}").enqueue_many(calls)
        total = per_key * KEYS
        command = [
            sys.executable, "-m", "brook.cli", "worker", "bench_keyed:app", "--tasks", task_name,
            "--concurrency", str(KEYED_CONCURRENCY), "--processes", str(KEYED_PROCESSES),
            "--log-level", os.environ.get("BENCH_WORKER_LOG", "warning"),
        ]  # fmt: skip
        workers = [subprocess.Popen(command, cwd=folder, env=env)]

        def left() -> int:
            return total - queue.stats()["acked"]

        # CPU from the first job done to the last, as the rate (start-up left out).
        pids = {"server": [server.pid]}
        at_first: dict[str, float] = {}

        def first_done() -> None:
            pids["workers"] = _children(workers[0].pid)
            assert len(pids["workers"]) == KEYED_PROCESSES, pids
            at_first.update({name: _cpu_s(p) for name, p in pids.items()})
            at_first["left"] = left()

        rate = _rate(left, total, on_first=first_done)
        server_us = (_cpu_s(pids["server"]) - at_first["server"]) / at_first["left"] * 1e6
        workers_us = (_cpu_s(pids["workers"]) - at_first["workers"]) / at_first["left"] * 1e6
        app.close()
        return rate, server_us, workers_us
    finally:
        _stop_all(workers)
        stop(server)
        sys.modules.pop("bench_keyed", None)
        sys.path.remove(str(folder))
        shutil.rmtree(folder, ignore_errors=True)


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (the worker processes under `--processes`)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()]


def _cpu_s(pids: list[int]) -> float:
    """CPU seconds (user and system) the processes spent so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


# ------------------------------------------------------------------ RQ on redis-server


def rq_trial(processes: int, fork: bool) -> tuple[float, float, float]:
    """RQ with Debian's redis-server (its default persistence: snapshots, no fsync per
    job). `fork`: RQ's default Worker (a process per job); else its SimpleWorker."""
    from redis import Redis
    from rq import Queue

    folder = scratch().resolve()
    (folder / "rq_tasks.py").write_text(PLAIN_TASKS)
    port = _free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
    )
    workers: list[subprocess.Popen[bytes]] = []
    sys.path.insert(0, str(folder))
    os.environ["LATENCY_FILE"] = str(folder / "latency.txt")
    try:
        connection = Redis(port=port)
        _wait_for(connection.ping)
        import rq_tasks

        queue = Queue("bench", connection=connection)
        total = RQ_FORK_JOBS if fork else RQ_JOBS
        for start in range(0, total, 500):
            queue.enqueue_many(
                [Queue.prepare_data(rq_tasks.noop) for _ in range(min(500, total - start))]
            )
        worker_class = "rq.worker.Worker" if fork else "rq.worker.SimpleWorker"
        command = [
            sys.executable, "-m", "rq.cli", "worker", "bench", "--url", f"redis://127.0.0.1:{port}",
            "--worker-class", worker_class, "--quiet",
        ]  # fmt: skip
        env = _env(folder)
        workers = [
            subprocess.Popen(command, cwd=folder, env=env, stderr=subprocess.DEVNULL)
            for _ in range(processes)
        ]

        def left() -> int:
            return len(queue) + queue.started_job_registry.count

        rate = _rate(left, total)
        p50, p99 = _latencies(folder, lambda sent: queue.enqueue(rq_tasks.stamp, sent))
        return rate, p50, p99
    finally:
        _stop_all(workers)
        redis.terminate()
        redis.wait()
        sys.modules.pop("rq_tasks", None)
        sys.path.remove(str(folder))
        shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------ huey on SQLite


def huey_trial(processes: int) -> tuple[float, float, float]:
    """huey's SqliteHuey, its consumer with CONCURRENCY threads, polling from 1 ms."""
    folder = scratch().resolve()
    (folder / "huey_tasks.py").write_text(HUEY_APP)
    db = str(folder / "huey.db")
    sys.path.insert(0, str(folder))
    os.environ["HUEY_DB"], os.environ["LATENCY_FILE"] = db, str(folder / "latency.txt")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        import huey_tasks

        for _ in range(HUEY_JOBS):
            huey_tasks.noop()
        command = [
            sys.executable, "-m", "huey.bin.huey_consumer", "huey_tasks.huey",
            "-w", str(CONCURRENCY), "-k", "thread", "-d", "0.001", "-m", "0.01", "-q",
        ]  # fmt: skip
        env = _env(folder, HUEY_DB=db)
        workers = [
            subprocess.Popen(command, cwd=folder, env=env, stderr=subprocess.DEVNULL)
            for _ in range(processes)
        ]
        huey = huey_tasks.huey
        rate = _rate(huey.pending_count, HUEY_JOBS)
        p50, p99 = _latencies(folder, lambda sent: huey_tasks.stamp(sent))
        return rate, p50, p99
    finally:
        _stop_all(workers)
        sys.modules.pop("huey_tasks", None)
        sys.path.remove(str(folder))
        shutil.rmtree(folder, ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for(check: Callable[[], object], timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            check()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# ------------------------------------------------------------------ report


def main() -> str:
    if not shutil.which("redis-server"):
        return "## Tasks\n\nskipped: redis-server is not installed (make bench installs it)\n"
    load_before = os.getloadavg()[0]
    trials: dict[str, list[tuple[float, float, float]]] = {}
    steps: list[tuple[str, Callable[[], tuple[float, float, float]]]] = [
        ("brook 1 process", lambda: brook_trial(1)),
        ("brook 2 processes", lambda: brook_trial(2)),
        ("rq SimpleWorker 1 process", lambda: rq_trial(1, fork=False)),
        ("rq SimpleWorker 2 processes", lambda: rq_trial(2, fork=False)),
        ("rq Worker (fork per job) 2 processes", lambda: rq_trial(2, fork=True)),
        ("huey 1 process", lambda: huey_trial(1)),
        ("huey 2 processes", lambda: huey_trial(2)),
    ]
    keyed: dict[str, list[tuple[float, float, float]]] = {}
    keyed_steps = [
        ("no-op, `concurrency_per_key=1`", "keyed_noop"),
        (f"{IO_MS} ms sleep, `concurrency_per_key=1`", "keyed_io"),
        ("no-op, no key limit", "unlimited_noop"),
    ]
    for _ in range(TRIALS):
        for name, step in steps:
            result = step()
            trials.setdefault(name, []).append(result)
            print(
                f"tasks {name}: {result[0]:,.0f} jobs/s, latency p50 {result[1]:.1f} ms "
                f"p99 {result[2]:.1f} ms",
                flush=True,
            )
        for name, task_name in keyed_steps:
            result = keyed_trial(task_name)
            keyed.setdefault(name, []).append(result)
            print(
                f"tasks keyed {name}: {result[0]:,.0f} jobs/s, CPU a job: server "
                f"{result[1]:.0f} us, workers {result[2]:.0f} us",
                flush=True,
            )

    def median(name: str, i: int) -> float:
        return statistics.median(r[i] for r in trials[name])

    def runs(name: str) -> str:
        return ", ".join(f"{r[0]:,.0f}" for r in trials[name])

    brook_1, brook_2 = median("brook 1 process", 0), median("brook 2 processes", 0)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Tasks — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load_before:.2f}, after "
        f"{os.getloadavg()[0]:.2f}.",
        f"- No-op jobs enqueued ahead ({BROOK_JOBS:,} Brook, {RQ_JOBS:,} RQ, {RQ_FORK_JOBS:,} "
        f"RQ forking, {HUEY_JOBS:,} huey), then the workers start; jobs/s from the first job "
        f"done to the last. Brook: `brook serve` and `brook worker --concurrency "
        f"{CONCURRENCY}` (every lease and ack durable, fdatasynced, before it returns; results "
        "kept). RQ 3.0 on Debian's redis-server 7.0 with its default persistence (RDB "
        f"snapshots: an acknowledged job is not on disk). huey 3.5 SqliteHuey, consumer with "
        f"{CONCURRENCY} threads polling every 1 to 10 ms. Latency: {LATENCY_JOBS} jobs one at "
        f"a time, {LATENCY_GAP_S * 1000:.0f} ms apart, to idle workers, from the enqueue call to "
        f"the task's start. Medians of {TRIALS} trials, interleaved.",
        "",
        "| system | jobs/s (median) | trials | enqueue-to-start p50 | p99 | target |",
        "| --- | ---: | --- | ---: | ---: | --- |",
    ]
    targets = {"brook 1 process": ">= 20,000/s; p50 <= 5 ms", "brook 2 processes": ">= 20,000/s"}
    for name in trials:
        lines.append(
            f"| {name} | {median(name, 0):,.0f} | {runs(name)} | {median(name, 1):.1f} ms | "
            f"{median(name, 2):.1f} ms | {targets.get(name, '')} |"
        )
    rq_best = max(median("rq SimpleWorker 1 process", 0), median("rq SimpleWorker 2 processes", 0))
    huey_best = max(median("huey 1 process", 0), median("huey 2 processes", 0))
    lines += [
        "",
        f"Brook with 2 processes is {brook_2 / rq_best:.1f}x RQ's best and "
        f"{brook_2 / huey_best:.1f}x huey's best here; 2 processes are {brook_2 / brook_1:.2f}x "
        "one.",
        "",
        f"Keyed: `brook worker --concurrency {KEYED_CONCURRENCY} --processes "
        f"{KEYED_PROCESSES}` (one command; {KEYED_PROCESSES} worker processes under its "
        f"supervisor), {KEYED_JOBS:,} jobs over {KEYS} keys ({KEYED_JOBS // KEYS} each) "
        "enqueued ahead, one task per run (`--tasks`); jobs/s from the first job done to the "
        "last, and the CPU (user and system, /proc) each side spent a job over the same span "
        f"(workers: both processes together). Medians of {TRIALS} trials, interleaved with "
        "the above.",
        "",
        "| task | jobs/s (median) | trials | server CPU a job | workers' CPU a job |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for name, results in keyed.items():
        rates = ", ".join(f"{r[0]:,.0f}" for r in results)
        lines.append(
            f"| {name} | {statistics.median(r[0] for r in results):,.0f} | {rates} | "
            f"{statistics.median(r[1] for r in results):.0f} us | "
            f"{statistics.median(r[2] for r in results):.0f} us |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
