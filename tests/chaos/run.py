"""One seeded chaos run (`make chaos SEED=N [MINUTES=M]`): a real `brook serve`, the
clients of workload.py over HTTP, endpoints' receivers, and the faults of the seed's
schedule (faults.py) applied to the real broker process; then the history checker.

The same seed runs the same schedule and the same clients' choices (the machine's
timing still differs). A failure prints the seed, each violated promise and the part of
the history that shows it; histories and the broker's log stay in the run's folder.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import brook
import brook.errors
from tests.chaos import checker, faults
from tests.chaos.history import History
from tests.chaos.history import read as read_history
from tests.chaos.workload import (
    AUDIT,
    ENDPOINTS,
    EVENTS,
    ORDERS,
    TASKS_QUEUE,
    TIMERS,
    WORK,
    Broker,
    Receivers,
    start_clients,
)
from tests.lake.outside import Outside
from tests.s3proxy import FaultyProxy, random_faults
from tests.s3server import CREDENTIALS, MotoServer
from tests.waiting import slow

ROOT = Path(__file__).parents[2]
SRC = str(ROOT / "src")
PERIODIC = "tick"
"""The periodic task of tests/chaos/tasks_app.py (paused before the final reads)."""
S3_LEASE_MS = 3000
"""On S3, a broker killed with SIGKILL holds the bucket this long: its restart waits."""
S3_TROUBLE_RATE = 0.3
"""While S3 is in trouble, the share of requests harmed (503, lost answers, resets)."""
LAKE_LAG_MS = 2000
"""The lake is written through the run (and its faults), not only at the end."""
QUIESCE_S = 120.0
"""After the clients stop: how long the broker may take to finish the work queued."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Child:
    """A process of the run, signalled by pid; `stop` drains it (SIGTERM)."""

    process: subprocess.Popen[bytes] | None = None
    log: Any

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()

    def drain(self) -> None:
        """SIGTERM, and wait for it to finish its work and exit (SIGKILL after 30 s)."""
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if self.process is not None:
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def stop(self) -> None:
        self.drain()
        self.log.close()


class Store:
    """Where the broker keeps its data: a directory, or a bucket of moto's S3 server
    reached through a proxy that a fault makes answer 503s, lose answers, reset
    connections and slow down (tests/s3proxy.py)."""

    def __init__(self, kind: str, folder: Path, seed: int) -> None:
        self.kind = kind
        self.trouble = threading.Event()
        self.moto: MotoServer | None = None
        self.proxy: FaultyProxy | None = None
        if kind == "local":
            self.where: dict[str, Any] = {"location": str(folder / "data")}
            self.serve_args = ["--data", self.where["location"]]
            return
        if kind != "s3":
            raise ValueError(f"STORAGE is local or s3, not {kind!r}")
        self.moto = MotoServer()
        harm = random_faults(seed, S3_TROUBLE_RATE, delay_s=0.02)
        self.proxy = FaultyProxy(
            self.moto.port,
            lambda method, path: harm(method, path) if self.trouble.is_set() else None,
        )
        self.where = {"location": self.moto.fresh_url(), "endpoint_url": self.moto.endpoint}
        self.serve_args = [
            "--storage", self.where["location"], "--endpoint-url", self.proxy.endpoint,
            "--cache-dir", str(folder / "cache"),
        ]  # fmt: skip

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        if self.moto is not None:
            self.moto.close()


class BrokerProcess(Child):
    """`brook serve` on a port of its own (a restart keeps it). On a local disk its
    storage is wrapped by the faulty storage (tests/chaos/faulty_serve.py), so signals
    fill the disk and fail fsyncs; on S3 it is `brook serve` itself."""

    def __init__(self, folder: Path, port: int, store: Store, name: str = "broker") -> None:
        self.folder = folder
        self.port = port
        self.store = store
        self.name = name
        self.config = folder / "brook.toml"
        self.config.write_text(
            f"delivery_allow_private_networks = true\nlake = true\nlake_lag_ms = {LAKE_LAG_MS}\n"
            f"lease_ms = {S3_LEASE_MS}\n"
        )
        self.log = (folder / f"{name}.log").open("a")
        self.process: subprocess.Popen[bytes] | None = None
        self.take_over = False
        """Its next start takes the bucket over from a live owner (`--take-over`)."""
        self.clock = folder / "clock-offset"
        """Seconds the machine's wall clock is off, as the broker sees it (a clock step)."""
        self.clock.write_text("0")

    def step_clock(self, seconds: float) -> None:
        """Set the broker's wall clock `seconds` off the real time (0: right again)."""
        self.clock.write_text(repr(seconds))
        self.signal(signal.SIGRTMIN)

    def start(self) -> None:
        env = {
            **os.environ,
            **CREDENTIALS,
            "PYTHONPATH": f"{SRC}{os.pathsep}{ROOT}",
            "BROOK_LOG_LEVEL": "info",
            "BROOK_CHAOS_CLOCK": str(self.clock),
        }
        module = "brook.cli" if self.store.kind == "s3" else "tests.chaos.faulty_serve"
        taking = ["--take-over"] if self.take_over else []
        self.take_over = False  # started again after a crash, it waits out the lease
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                module,
                "--config",
                str(self.config),
                "serve",
                *self.store.serve_args,
                *taking,
                "--port",
                str(self.port),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )
        deadline = time.monotonic() + slow(60)
        log_path = self.folder / f"{self.name}.log"
        seen = log_path.stat().st_size if log_path.exists() else 0
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"brook serve exited {self.process.returncode} (see {log_path})")
            text = log_path.read_text()[seen:]
            if re.search(r"listening on http://127\.0\.0\.1:\d+ .*; ready", text):
                return
            time.sleep(0.05)
        raise RuntimeError(f"brook serve did not start in 60 s (see {log_path})")


class Front(Child):
    """The address every client and worker uses (tests/chaos/front.py): a TCP front that
    passes each connection to the broker it points at, as a load balancer would."""

    def __init__(self, folder: Path, broker_port: int) -> None:
        self.port = free_port()
        self.target = folder / "front-target"
        self.point(broker_port)
        self.log = (folder / "front.log").open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.chaos.front", str(self.port), str(self.target)],
            stdout=subprocess.PIPE, stderr=self.log, cwd=ROOT,
        )  # fmt: skip
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"the front did not start (see {folder / 'front.log'})")

    def point(self, port: int) -> None:
        """Send new connections to the broker on `port`."""
        written = self.target.with_suffix(".tmp")
        written.write_text(str(port))
        written.replace(self.target)


class Brokers:
    """The broker the clients reach now, and those a take-over replaced (they stop by
    themselves once fenced: `brook serve` exits 1)."""

    def __init__(self, folder: Path, store: Store) -> None:
        self.folder = folder
        self.store = store
        self.current = BrokerProcess(folder, free_port(), store)
        self.replaced: list[BrokerProcess] = []
        self.front: Front | None = None

    def start(self) -> int:
        """Start the first broker (and on S3 the front); the port clients use."""
        self.current.start()
        if self.store.kind != "s3":
            return self.current.port
        self.front = Front(self.folder, self.current.port)
        return self.front.port

    def take_over(self) -> None:
        """A second broker takes the bucket over from the live one (a rolling deploy):
        once it serves, the front sends new connections to it."""
        assert self.front is not None, "a take-over needs S3 and the front"
        name = f"broker-{len(self.replaced) + 2}"
        new = BrokerProcess(self.folder, free_port(), self.store, name)
        new.take_over = True
        new.start()
        self.front.point(new.port)
        self.replaced.append(self.current)
        self.current = new

    def restart(self) -> None:
        """An operator's restart: SIGTERM (the broker drains), then start again."""
        self.current.drain()
        self.current.start()

    def stop(self) -> None:
        for process in [self.current, *self.replaced]:
            process.stop()
        if self.front is not None:
            self.front.stop()


class WorkerProcess(Child):
    """`brook worker tests.chaos.tasks_app:app`: its tasks note their runs in the
    run's folder."""

    def __init__(self, folder: Path, port: int, name: str) -> None:
        self.folder = folder
        self.port = port
        self.log = (folder / f"{name}.log").open("a")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": f"{SRC}{os.pathsep}{ROOT}",
            "BROOK_CHAOS_URL": f"http://127.0.0.1:{self.port}",
            "BROOK_CHAOS_HISTORY": str(self.folder),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "brook.cli", "worker", "tests.chaos.tasks_app:app",
             "--concurrency", "4"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip


def setup(broker: Broker, receivers: Receivers, secrets: dict[str, str]) -> None:
    calls = [
        ("PUT", f"/v1/topics/{ORDERS}", {"partitions": 3}),
        ("PUT", f"/v1/topics/{TIMERS}", {"partitions": 1}),
        ("PUT", f"/v1/topics/{TASKS_QUEUE}", {"partitions": 2}),
        (
            "PUT",
            f"/v1/topics/{ORDERS}/queues/{WORK}",
            {
                "ordering": "key",
                "max_attempts": 1000,
                "visibility_timeout_ms": 3000,
                "backoff": {"min_ms": 50, "max_ms": 500},
            },
        ),
    ]
    for topic in EVENTS:
        calls.append(("PUT", f"/v1/topics/{topic}", {"partitions": 2}))
    for name in ENDPOINTS:
        calls.append(
            (
                "PUT",
                f"/v1/endpoints/{name}",
                {
                    "url": receivers.url(name),
                    "topics": ["chaos.events.*"],
                    "secret": secrets[name],
                    "max_attempts": 1000,
                    "backoff": {"min_ms": 50, "max_ms": 1000},
                },
            )
        )
    for method, path, body in calls:
        status, answer = broker.call(method, path, body)
        if status != 200:
            raise RuntimeError(f"setting up: {method} {path} answered {status} {answer}")


def _actions(
    fault: faults.Fault, brokers: Brokers, worker: WorkerProcess, receivers: Receivers
) -> tuple[Callable[[], object], Callable[[], object]]:
    """How `fault` begins, and how it ends after its length."""
    process = brokers.current
    return {
        "kill9": (process.kill, process.start),
        "pause": (lambda: process.signal(signal.SIGSTOP), lambda: process.signal(signal.SIGCONT)),
        "restart": (brokers.restart, lambda: None),
        "take-over": (brokers.take_over, lambda: None),
        "disk-full": (
            lambda: process.signal(signal.SIGUSR1),
            lambda: process.signal(signal.SIGUSR1),
        ),
        "eio": (lambda: process.signal(signal.SIGUSR2), lambda: None),
        "clock-step": (lambda: process.step_clock(fault.step_s), lambda: process.step_clock(0)),
        "worker-kill9": (worker.kill, worker.start),
        "worker-pause": (
            lambda: worker.signal(signal.SIGSTOP),
            lambda: worker.signal(signal.SIGCONT),
        ),
        "s3-trouble": (process.store.trouble.set, process.store.trouble.clear),
        "receiver-down": (receivers.down.set, receivers.down.clear),
    }[fault.kind]


def apply_faults(
    plan: list[faults.Fault],
    brokers: Brokers,
    workers: list[WorkerProcess],
    receivers: Receivers,
    history: History,
    started: float,
    done: threading.Event,
    applied: list[list[Any]],
) -> None:
    for fault in plan:
        if done.wait(max(0.0, started + fault.at_s - time.monotonic())):
            return
        begin = time.monotonic()
        worker = workers[fault.target % len(workers)]
        on_worker = fault.kind.startswith("worker-") and worker.process is not None
        pid = worker.process.pid if on_worker and worker.process is not None else None
        history.note("fault", fault=fault.kind, length_s=fault.length_s, target=fault.target,
                     pid=pid, step_s=fault.step_s)  # fmt: skip
        begin_fault, end_fault = _actions(fault, brokers, worker, receivers)
        begin_fault()
        done.wait(fault.length_s)
        end_fault()
        history.note("fault-over", fault=fault.kind)
        applied.append([begin, time.monotonic(), fault.kind, pid, fault.step_s])


def read_all(broker: Broker, topic: str, partitions: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for p in range(partitions):
        records: list[dict[str, Any]] = []
        while True:
            status, body = broker.call(
                "GET", f"/v1/topics/{topic}/records?partition={p}&offset={len(records)}&limit=1000"
            )
            if status != 200:
                raise RuntimeError(f"reading {topic}/{p}: {status} {body}")
            got = [
                {
                    "offset": r["offset"],
                    "value": r.get("value"),
                    "key": r.get("key"),
                    "timestamp": r["timestamp"],
                    "headers": r.get("headers") or {},
                }
                for r in body["records"]
            ]
            if not got:
                break
            records.extend(got)
        out[str(p)] = records
    return out


def quiesce(broker: Broker, receivers: Receivers, deadline: float) -> None:
    """Wait until the queue group, the endpoints and the stream group have nothing left
    (or the deadline)."""
    base = f"/v1/topics/{ORDERS}/queues/{WORK}"
    while True:
        status, body = broker.call("GET", base)
        counts = body["stats"] if status == 200 else {}
        busy = any(counts.get(s, 1) for s in ("ready", "leased", "retrying"))
        backlog = 0
        for name in ENDPOINTS:
            status, stats = broker.call("GET", f"/v1/endpoints/{name}/stats")
            backlog += (
                1
                if status != 200
                else sum(stats.get(s, 0) for s in ("ready", "leased", "retrying"))
            )
        status, group = broker.call("GET", f"/v1/topics/{EVENTS[0]}/groups/{AUDIT}")
        lagging = status != 200 or any(group["lag"].values())
        if (not busy and backlog == 0 and not lagging) or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def read_lake(
    where: dict[str, Any], topics: list[str]
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each topic's rows as the lake's manifest lists them, read without Brook (json and
    pyarrow's own filesystems: tests/lake/outside.py), by partition, in offset order."""
    outside = Outside(where)
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for topic in topics:
        rows: dict[str, list[dict[str, Any]]] = {}
        for partition, offset, timestamp, key, value, _ in outside.rows(topic):
            rows.setdefault(str(partition), []).append(
                {
                    "offset": offset,
                    "value": value.decode(errors="replace"),
                    "key": None if key is None else key.decode(errors="replace"),
                    "timestamp": timestamp,
                }
            )
        for partition_rows in rows.values():
            partition_rows.sort(key=lambda r: r["offset"])
        out[topic] = rows
    return out


def quiesce_tasks(url: str, history: History, deadline: float) -> dict[str, dict[str, Any]]:
    """Wait until every acknowledged job is done (or the deadline); their last states."""
    refs = {e["ref"] for e in history.events if e["kind"] in ("enqueue", "chord") and e["ref"]}
    states: dict[str, dict[str, Any]] = {}
    with brook.App(url) as app:
        while True:
            for ref in sorted(refs - {r for r, s in states.items() if s["state"] in DONE}):
                try:
                    status = app.job(ref)
                except brook.errors.BrookError as exc:
                    states[ref] = {"state": f"unreadable: {exc}", "attempts": 0}
                    continue
                states[ref] = {"state": status.state, "attempts": status.attempts}
            if all(s["state"] in DONE for s in states.values()) or time.monotonic() > deadline:
                return states
            time.sleep(0.5)


DONE = ("acked", "dead")


def run(seed: int, seconds: float, folder: Path, storage: str = "local") -> list[checker.Violation]:
    rng = random.Random(seed)
    secrets = {name: "whsec_" + base64.b64encode(rng.randbytes(32)).decode() for name in ENDPOINTS}
    history = History(folder / "history-driver.jsonl", "driver")
    store = Store(storage, folder, seed)
    brokers = Brokers(folder, store)
    try:
        port = brokers.start()
    except BaseException:
        brokers.stop()
        store.close()
        raise
    broker = Broker(port, history, seed)
    receivers = Receivers(history, secrets, seed)
    plan = faults.schedule(seed, seconds, s3=storage == "s3")
    applied: list[list[Any]] = []
    done = threading.Event()
    workers = [WorkerProcess(folder, port, f"worker-{i}") for i in range(faults.WORKERS)]
    try:
        setup(broker, receivers, secrets)
        for worker in workers:
            worker.start()
        started = time.monotonic()
        senders, queue_workers = start_clients(broker)
        injector = threading.Thread(
            target=apply_faults,
            args=(plan, brokers, workers, receivers, history, started, done, applied),
        )
        injector.start()
        done.wait(seconds)
        done.set()
        injector.join()
        broker.stop_sending.set()
        for sender in senders:  # (an append in flight lands before the work is counted)
            sender.join(60)
        clients_stopped = time.monotonic()
        if brokers.current.process is None or brokers.current.process.poll() is not None:
            brokers.current.start()
        for worker in workers:
            if worker.process is None or worker.process.poll() is not None:
                worker.start()
        quiesce(broker, receivers, time.monotonic() + QUIESCE_S)
        jobs = quiesce_tasks(broker.url, history, time.monotonic() + QUIESCE_S)
        broker.stop.set()
        for thread in queue_workers:
            thread.join(60)
        for worker in workers:
            worker.stop()
        status, body = broker.call("GET", f"/v1/topics/{ORDERS}/queues/{WORK}")
        counts = body["stats"] if status == 200 else {"unreadable": status}
        status, body = broker.call("POST", f"/v1/schedules/task.{PERIODIC}/pause")
        if status != 200:
            raise RuntimeError(f"pausing the periodic task answered {status} {body}")
        time.sleep(3.5)  # the last timers fall due (3 s at most); nothing appends after
        status, body = broker.call("POST", "/v1/lake/sync", {})
        if status != 200:
            raise RuntimeError(f"the lake's sync answered {status} {body}")
        logs = {
            ORDERS: read_all(broker, ORDERS, 3),
            TIMERS: read_all(broker, TIMERS, 1),
            TASKS_QUEUE: read_all(broker, TASKS_QUEUE, 2),
        }
        for topic in EVENTS:
            logs[topic] = read_all(broker, topic, 2)
        final = {
            "logs": logs,
            "lake": read_lake(store.where, sorted(logs)),
            "queue": counts,
            "jobs": jobs,
            "faults": applied,
            "clients_stopped": clients_stopped,
        }
    finally:
        done.set()
        broker.stop_sending.set()
        broker.stop.set()
        for worker in workers:
            worker.stop()
        brokers.stop()
        store.close()
        receivers.close()
        history.write()
    (folder / "final.json").write_text(json.dumps(final, sort_keys=True))
    events = read_history(sorted(folder.glob("history-*.jsonl")))
    summary = {
        "seed": seed,
        "seconds": seconds,
        "storage": storage,
        "appends acknowledged": sum(
            1 for e in events if e["kind"] == "append" and e["status"] == 200
        ),
        "appends unknown": sum(1 for e in events if e["kind"] == "append" and e["status"] is None),
        "leases": sum(len(e["jobs"]) for e in events if e["kind"] == "lease"),
        "deliveries": sum(1 for e in events if e["kind"] == "delivery"),
        "timers": sum(1 for e in events if e["kind"] == "timer" and e["status"] == 200),
        "jobs enqueued": sum(1 for e in events if e["kind"] == "enqueue" and e["status"] == 200),
        "task runs": sum(1 for e in events if e["kind"] == "run-start"),
        "chords": sum(1 for e in events if e["kind"] == "chord" and e["status"] == 200),
        "chord callbacks": sum(1 for e in events if e["kind"] == "chord-callback"),
        "records polled": sum(len(e["records"]) for e in events if e["kind"] == "poll"),
        "faults": [f[2] for f in applied],
    }
    print(json.dumps(summary))
    return checker.check(events, final)


def report(seed: int, violations: list[checker.Violation], folder: Path) -> str:
    lines = [f"chaos seed {seed}: {len(violations)} promise(s) broken (history in {folder})"]
    for v in violations[:20]:
        lines.append(f"- {v.promise}: {v.detail}")
        for e in v.excerpt[:6]:
            lines.append(f"    {json.dumps(e, sort_keys=True)[:300]}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SEED", "1")))
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("MINUTES", "1")))
    parser.add_argument(
        "--storage", choices=("local", "s3"), default=os.environ.get("STORAGE", "local")
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix=f"brook-chaos-{args.seed}-"))
    violations = run(args.seed, args.minutes * 60, folder, args.storage)
    if violations:
        print(report(args.seed, violations, folder))
        sys.exit(1)
    print(f"chaos seed {args.seed}: every promise held (history in {folder})")


if __name__ == "__main__":
    main()
