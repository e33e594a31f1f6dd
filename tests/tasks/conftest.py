"""Real `brook serve` and `brook worker` processes for the task layer's tests.

The tasks under test are written to a module in the test's directory; each run of
a job appends a line to a journal file (pid, job, key, start and end times), which
is how a test sees from outside what ran, where, when and how often."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from tests.environment import unmeasured
from tests.served import SRC, Served
from tests.waiting import slow

TASKS = """
import asyncio, json, os, time
import brook

app = brook.App(os.environ["BROOK_URL"])
JOURNAL = os.environ["JOURNAL"]


def note(job, **fields):
    with open(JOURNAL, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "job": job, **fields}) + "\\n")


@app.task(max_attempts=5, backoff={"min_ms": 50, "max_ms": 200})
def work(job, customer=None, seconds=0.0):
    started = time.time()
    note(job, key=customer, event="start", at=started)
    time.sleep(seconds)
    note(job, key=customer, event="end", at=time.time(), started=started)
    return {"job": job}


@app.task(concurrency_per_key=1)
def serial(job, customer, seconds=0.05):
    started = time.time()
    time.sleep(seconds)
    note(job, key=customer, event="end", at=time.time(), started=started)


@app.task
async def doubled(job, x):
    await asyncio.sleep(0.01)
    note(job, event="end", at=time.time())
    return x * 2


@app.task(visibility_timeout_ms=1000)
def long(job, seconds):
    started = time.time()
    note(job, event="start", at=started)
    time.sleep(seconds)
    note(job, event="end", at=time.time(), started=started)


@app.task(max_attempts=2, backoff={"min_ms": 10})
def fails(job):
    note(job, event="end", at=time.time())
    raise ValueError(f"no customer {job}")


@app.task(timeout_ms=300, max_attempts=1)
def hangs(job):
    time.sleep(2)
    note(job, event="end", at=time.time())


@app.task
async def nap_async(job, seconds):
    note(job, event="start", at=time.time())
    await asyncio.sleep(seconds)
    note(job, event="end", at=time.time())


@app.task(isolation="process")
def nap_process(job, seconds):
    note(job, event="start", at=time.time())
    time.sleep(seconds)
    note(job, event="end", at=time.time())


@app.task
def nap_thread(job, seconds):
    note(job, event="start", at=time.time())
    time.sleep(seconds)
    note(job, event="end", at=time.time())


@app.task(visibility_timeout_ms=1000, max_attempts=20, backoff={"min_ms": 10, "max_ms": 100})
def square(job, i):
    time.sleep(i % 3 / 100)
    note(job, event="member", i=i, at=time.time())
    return i * i


@app.task(visibility_timeout_ms=1000, max_attempts=20, backoff={"min_ms": 10, "max_ms": 100})
def gathered(results, job):
    run = brook.current_job()
    note(job, event="callback", ref=run.ref, attempt=run.attempt, results=results, at=time.time())
    return sum(results)
"""


BEATS = """
import json, os, time
import brook

app = brook.App(os.environ["BROOK_URL"])


@app.periodic(every_ms=1000)
def beat():
    with open(os.environ["JOURNAL"], "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "job": "beat", "event": "end", "at": time.time()}) + "\\n")
"""


class Workers:
    """`brook worker` processes over one `brook serve`, and what their jobs did."""

    def __init__(self, root: Path, served: Served, restart_broker: Callable[[], None]) -> None:
        self.root = root
        self.restart_broker = restart_broker
        """kill -9 the broker, and start it again on the same data and port."""
        self.url = f"http://127.0.0.1:{served.port}"
        self.journal = root / "journal.jsonl"
        (root / "jobs_app.py").write_text(TASKS)
        (root / "beats_app.py").write_text(BEATS)
        self.env = {
            **unmeasured(),
            "PYTHONPATH": f"{root}{os.pathsep}{SRC}",
            "BROOK_URL": self.url,
            "JOURNAL": str(self.journal),
        }
        self.processes: list[subprocess.Popen[str]] = []
        sys.path.insert(0, str(root))
        # The module reads them as it is imported; put back at once, so that no later
        # test (a `brook` command reading BROOK_URL) meets this test's server.
        saved = {name: os.environ.get(name) for name in ("BROOK_URL", "JOURNAL")}
        os.environ["BROOK_URL"], os.environ["JOURNAL"] = self.url, str(self.journal)
        try:
            import jobs_app
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        self.app = jobs_app.app

    def start(self, *args: str, app: str = "jobs_app:app") -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-m", "brook.cli", "worker", app, *args],
            cwd=self.root,
            env=self.env,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.processes.append(process)
        return process

    def started(
        self, process: subprocess.Popen[str], timeout: float = 60.0, count: int = 1
    ) -> None:
        """Wait for `count` "worker started" lines (one per process of `--processes`;
        its stderr is read from then on by a thread, so the pipe never fills)."""
        seen = threading.Event()

        def read() -> None:
            assert process.stderr is not None
            started = 0
            for line in process.stderr:
                if "worker started" in line:
                    started += 1
                    if started >= count:
                        seen.set()

        threading.Thread(target=read, daemon=True).start()
        assert seen.wait(slow(timeout)), f"the worker did not start in {timeout} s"

    def notes(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        return [json.loads(line) for line in self.journal.read_text().splitlines() if line]

    def wait_for(self, done: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + slow(timeout)
        while time.monotonic() < deadline:
            notes = self.notes()
            if done(notes):
                return notes
            time.sleep(0.05)
        raise AssertionError(f"the jobs did not get there in {timeout} s: {self.notes()[-5:]}")

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            process.wait()
            if process.stderr is not None:
                process.stderr.close()
        self.app.close()
        sys.modules.pop("jobs_app", None)
        sys.path.remove(str(self.root))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    port = str(free_port())
    served = Served(tmp_path / "data", "--port", port)

    def restart_broker() -> None:
        nonlocal served
        served.close()
        served = Served(tmp_path / "data", "--port", port)

    try:
        fleet = Workers(tmp_path, served, restart_broker)
    except BaseException:
        served.close()
        raise
    try:
        yield fleet
    finally:
        fleet.close()
        served.close()


@pytest.fixture(params=["embedded", "remote"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[brook.App]:
    """An app on a directory (embedded), or on a real `brook serve` (remote)."""
    served = None
    if request.param == "remote":
        served = Served(tmp_path / "data")
        application = brook.App(f"http://127.0.0.1:{served.port}")
    else:
        application = brook.App(str(tmp_path / "data"))
    yield application
    application.close()
    if served is not None:
        served.close()


class Running:
    """A worker of `app` on a thread of this process, stopped at the end (`stop()`, or
    as a context manager)."""

    def __init__(self, app: brook.App, concurrency: int = 4) -> None:
        from brook.tasks.worker import Worker

        self.worker = Worker(app, concurrency=concurrency)
        self.thread = threading.Thread(target=lambda: self.worker.run(install_signals=False))
        self.thread.start()

    def stop(self) -> None:
        self.worker.stop()
        self.thread.join(timeout=30)

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
