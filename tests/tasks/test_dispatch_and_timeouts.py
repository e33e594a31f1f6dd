"""Issue 48's defects, through real `brook serve` and `brook worker` processes: each job
runs the function it names (tasks sharing a queue, workers with different `--tasks`),
timeouts hold (a thread keeps its key until it returns; a process run is killed at
the bound; an async run is cancelled), settings belong to the worker, and a worker
started before its broker waits for it."""

from __future__ import annotations

import datetime
import decimal
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from brook.errors import BadRequest, NotFound
from brook.tasks import App
from tests.environment import unmeasured
from tests.served import SRC
from tests.tasks.conftest import Workers
from tests.waiting import slow

ROUTED = """
import asyncio, json, os, time
import brook

app = brook.App(os.environ["BROOK_URL"])
JOURNAL = os.environ["JOURNAL"]


def note(**fields):
    with open(JOURNAL, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "at": time.time(), **fields}) + "\\n")


@app.task(queue="emails")
def welcome(user):
    note(fn="welcome", user=user)
    return {"welcomed": user}


@app.task(queue="emails")
def invoice(user, amount=0):
    note(fn="invoice", user=user, amount=amount)
    return {"invoiced": user, "amount": amount}


@app.task(timeout_ms=1000, concurrency_per_key=1, max_attempts=3, backoff={"min_ms": 10, "max_ms": 10})
def charge(order, seconds):
    note(fn="charge", order=order, event="start", attempt=brook.current_job().attempt)
    time.sleep(seconds)
    note(fn="charge", order=order, event="end")


@app.task(timeout_ms=500, isolation="process", max_attempts=1)
def stuck(order):
    note(fn="stuck", order=order, event="start", pid_child=os.getpid())
    time.sleep(30)
    note(fn="stuck", order=order, event="end")


@app.task(options_only=True)
def set_cache(key, value):
    note(fn="set_cache", key=key, value=value, types=[type(key).__name__, type(value).__name__])


@app.task(timeout_ms=300, max_attempts=1)
async def dawdle(order):
    note(fn="dawdle", order=order, event="start")
    await asyncio.sleep(30)
    note(fn="dawdle", order=order, event="end")
"""


def _routed(workers: Workers) -> App:
    (workers.root / "routed_app.py").write_text(ROUTED)
    sys.modules.pop("routed_app", None)
    saved = dict(os.environ)
    os.environ.update({"BROOK_URL": workers.url, "JOURNAL": str(workers.journal)})
    try:
        module = importlib.import_module("routed_app")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    app: App = module.app
    return app


def _wait_done(app: App, refs: list[Any], timeout: float = 30.0) -> list[Any]:
    deadline = time.monotonic() + slow(timeout)
    while time.monotonic() < deadline:
        states = [app.job(ref) for ref in refs]
        if all(s.done for s in states):
            return states
        time.sleep(0.05)
    raise AssertionError(f"jobs not done in {timeout} s: {[app.job(r) for r in refs]}")


def test_tasks_sharing_a_queue_run_their_own_functions(workers: Workers) -> None:
    app = _routed(workers)
    try:
        welcomes = [app.tasks["welcome"].enqueue(f"w{i}") for i in range(10)]
        invoices = [app.tasks["invoice"].enqueue(f"i{i}", amount=i) for i in range(10)]
        # A record written by hand onto the queue names its task: that one runs.
        by_hand = app.broker.topic("emails").append(
            json.dumps({"task": "invoice", "args": ["h"], "kwargs": {"amount": 7}}).encode()
        )
        workers.start("--concurrency", "4", app="routed_app:app")
        states = _wait_done(app, [*welcomes, *invoices])
        assert [s.state for s in states] == ["acked"] * 20
        assert [s.result for s in states[:10]] == [{"welcomed": f"w{i}"} for i in range(10)]
        assert [s.result for s in states[10:]] == [
            {"invoiced": f"i{i}", "amount": i} for i in range(10)
        ]
        notes = workers.wait_for(lambda n: any(x.get("user") == "h" for x in n))
        ran = {(n["fn"], n["user"]) for n in notes if "user" in n}
        assert ran == {("welcome", f"w{i}") for i in range(10)} | {
            ("invoice", f"i{i}") for i in range(10)
        } | {("invoice", "h")}
        assert by_hand.offset == 20
    finally:
        app.close()


def test_workers_with_different_tasks_on_one_queue(workers: Workers) -> None:
    """Each job goes to the worker that runs its task, its attempt not spent by the
    other; a job naming a task the app does not have ends dead, saying so."""
    app = _routed(workers)
    try:
        welcomes = [app.tasks["welcome"].enqueue(f"w{i}") for i in range(4)]
        invoices = [app.tasks["invoice"].enqueue(f"i{i}") for i in range(4)]
        ghost = app.send_task("ghost", args=["x"], queue="emails")
        workers.start("--tasks", "welcome", "--concurrency", "2", app="routed_app:app")
        workers.start("--tasks", "invoice", "--concurrency", "2", app="routed_app:app")
        states = _wait_done(app, [*welcomes, *invoices, ghost], timeout=60)
        assert [s.state for s in states[:8]] == ["acked"] * 8
        assert all(s.attempts == 1 for s in states[:8]), [s.attempts for s in states]
        assert states[8].state == "dead" and "no task named ghost" in states[8].error
        pids: dict[str, set[int]] = {}
        for note in workers.notes():
            pids.setdefault(note["fn"], set()).add(note["pid"])
        assert len(pids["welcome"]) == 1 and len(pids["invoice"]) == 1
        assert pids["welcome"] != pids["invoice"]
    finally:
        app.close()


def test_a_sync_timeout_never_lets_two_runs_of_a_key_overlap(workers: Workers) -> None:
    """timeout_ms=1000 on a 2.5 s run with concurrency_per_key=1: the attempt fails at
    its bound, but the retry starts only after the first run really returned."""
    app = _routed(workers)
    try:
        ref = app.tasks["charge"].options(key="customer-1").enqueue("o-1", 2.5)
        worker = workers.start("--concurrency", "4", app="routed_app:app")
        notes = workers.wait_for(
            lambda n: sum(1 for x in n if x.get("fn") == "charge" and x["event"] == "end") >= 2,
            timeout=60,
        )
        runs = [n for n in notes if n.get("fn") == "charge"]
        starts = [n["at"] for n in runs if n["event"] == "start"]
        ends = [n["at"] for n in runs if n["event"] == "end"]
        assert starts[1] >= ends[0], f"the retry started before the first run ended: {runs}"
        assert [n["attempt"] for n in runs if n["event"] == "start"][:2] == [1, 2]
        worker.terminate()
        _, stderr = worker.communicate(timeout=30)
        lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
        timed_out = [line for line in lines if line.get("outcome") == "timed out"]
        assert timed_out, stderr[-2000:]
        assert "keeps its slot" in timed_out[0]["msg"]
        status = app.job(ref)
        assert status.attempts >= 2 and "TimeoutError" in status.error
    finally:
        app.close()


def test_arguments_arrive_as_sent_and_parameters_are_never_options(workers: Workers) -> None:
    """A parameter named `key` is the function's (options_only); a value that JSON would
    carry as something else is refused at enqueue, naming where it is."""
    app = _routed(workers)
    try:
        set_cache = app.tasks["set_cache"]
        value = {"a": [1, 2.5, None, True, "x"], "b": {"c": -(2**63)}}
        ref = set_cache.options(priority=5).enqueue(key="user:7", value=value)
        for bad, kind in (
            (datetime.datetime(2026, 1, 1), "datetime"),
            (b"raw", "bytes"),
            (decimal.Decimal("1.10"), "Decimal"),
            ((1, 2), "tuple"),
            ({1: "a"}, "int"),
            (float("nan"), "float"),
        ):
            with pytest.raises(BadRequest, match=kind):
                set_cache.enqueue(key="user:8", value={"nested": [bad]})
        workers.start("--concurrency", "2", app="routed_app:app")
        (state,) = _wait_done(app, [ref])
        assert state.state == "acked"
        (note,) = [n for n in workers.notes() if n.get("fn") == "set_cache"]
        assert note["key"] == "user:7" and note["value"] == value
        assert note["types"] == ["str", "dict"]
        assert app.broker.topic("tasks.set_cache").end_offsets() == {0: 1}
    finally:
        app.close()


def _trace_times(app: App, ref: Any) -> dict[str, int]:
    transitions = app.broker.queue(ref.topic, "tasks").trace(ref.partition, ref.offset)
    return {t.state.value: t.at_ms for t in transitions}


def test_a_process_run_is_killed_and_an_async_one_cancelled_at_the_bound(
    workers: Workers,
) -> None:
    app = _routed(workers)
    try:
        stuck = app.tasks["stuck"].enqueue("s-1")
        dawdle = app.tasks["dawdle"].enqueue("d-1")
        workers.start("--concurrency", "2", app="routed_app:app")
        states = _wait_done(app, [stuck, dawdle], timeout=60)
        assert [s.state for s in states] == ["dead", "dead"]
        assert all("TimeoutError" in s.error for s in states)
        notes = workers.notes()
        started = {n["fn"]: n for n in notes if n.get("event") == "start"}
        assert not [n for n in notes if n.get("event") == "end"]
        # Dead (the failed attempt durable) within a little of the bound: the run is
        # stopped within 100 ms; the broker's durable write and the clocks' reading add
        # a little (the trace's times are the broker's), more on a loaded machine.
        allowed_ms = slow(0.25) * 1000
        for fn, ref, bound_ms in (("stuck", stuck, 500), ("dawdle", dawdle, 300)):
            dead_ms = _trace_times(app, ref)["dead"]
            late_ms = dead_ms - started[fn]["at"] * 1000 - bound_ms
            assert -20 <= late_ms <= allowed_ms, (
                f"{fn} ended {late_ms:.0f} ms after its bound ({allowed_ms:.0f} allowed)"
            )
        child = started["stuck"]["pid_child"]
        assert not Path(f"/proc/{child}").exists() or _is_zombie(child)
    finally:
        app.close()


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_producers_declaration_never_writes_the_workers_settings(workers: Workers) -> None:
    (workers.root / "producer_app.py").write_text(
        "import os, brook\n"
        "app = brook.App(os.environ['BROOK_URL'])\n"
        "@app.task(name='charge', max_attempts=2)\n"
        "def charge(order, seconds):\n"
        "    raise RuntimeError('producers do not run it')\n"
        "app.tasks['charge'].enqueue('o-9', 0.0)\n"
        "app.close()\n"
    )
    app = _routed(workers)
    try:
        worker = workers.start("--tasks", "charge", app="routed_app:app")
        deadline = time.monotonic() + slow(20)
        while not _queues_of(app, "tasks.charge"):
            assert time.monotonic() < deadline, "the worker did not claim its queue"
            time.sleep(0.1)
        queue = app.broker.queue("tasks.charge", "tasks", create=False)
        assert queue.settings()["max_attempts"] == 3
        subprocess.run(
            [sys.executable, "producer_app.py"], cwd=workers.root, env=workers.env, check=True
        )
        assert queue.settings()["max_attempts"] == 3
        worker.terminate()
        assert worker.wait(timeout=30) == 0
    finally:
        app.close()


def _queues_of(app: App, topic: str) -> list[Any]:
    try:
        return [app.broker.queue(topic, "tasks", create=False)]
    except NotFound:
        return []


def test_a_worker_started_before_its_broker_waits_for_it(tmp_path: Path) -> None:
    (tmp_path / "lonely_app.py").write_text(
        "import brook\napp = brook.App('http://127.0.0.1:9')\n@app.task\ndef noop():\n    pass\n"
    )
    env = {**unmeasured(), "PYTHONPATH": f"{tmp_path}:{SRC}"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "brook.cli", "worker", "lonely_app:app", "--connect-timeout", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert 1.5 <= took <= 20, took
    assert "trying again" in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "could not be reached within 2 s" in last and "Traceback" not in done.stderr
