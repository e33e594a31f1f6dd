"""Hooks (`@app.on_start`, `on_success`, `on_retry`, `on_failure`, `on_worker_start`,
app-wide or per task): called where docs/TASKS.md says, in the job's context, and a
hook that raises changes no job's outcome."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.tasks.worker import Worker
from tests.waiting import wait_for


@pytest.fixture
def app(tmp_path: Path) -> Iterator[brook.App]:
    application = brook.App(str(tmp_path / "data"))
    yield application
    application.close()


def _work(app: brook.App, until: Any) -> None:
    worker = Worker(app, concurrency=4)
    thread = threading.Thread(target=lambda: worker.run(install_signals=False))
    thread.start()
    try:
        wait_for(until, 30)
    finally:
        worker.stop()
        thread.join(30)


def test_each_hook_is_called_at_its_point_in_the_jobs_context(
    app: brook.App, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[tuple[Any, ...]] = []
    lock = threading.Lock()

    def note(*what: Any) -> None:
        with lock:
            calls.append(what)

    fast = {"min_ms": 10, "max_ms": 20}

    @app.task(max_attempts=3, backoff=fast)
    def flaky(n: int) -> dict[str, int]:
        if brook.current_job().attempt == 1:
            raise RuntimeError("first time")
        return {"n": n}

    @app.task(max_attempts=2, backoff=fast)
    def doomed() -> None:
        raise ValueError("never")

    @app.task
    def given_up() -> None:
        raise brook.Discard("not ours")

    @app.task
    async def waits() -> int:
        await asyncio.sleep(0)
        return 7

    @app.on_worker_start
    def started() -> None:
        note("worker_start")

    @app.on_start
    def on_start(job: brook.CurrentJob) -> None:
        note("start", job.task, job.attempt, brook.current_job() == job)

    @app.on_success
    def on_success(job: brook.CurrentJob, result: Any) -> None:
        note("success", job.task, job.attempt, json.dumps(result))

    @app.on_retry
    def on_retry(job: brook.CurrentJob, error: str) -> None:
        note("retry", job.task, job.attempt, error.splitlines()[0])

    @app.on_failure
    def on_failure(job: brook.CurrentJob, error: str) -> None:
        note("failure", job.task, job.attempt, error.splitlines()[0])
        note("failure's context", brook.current_job().ref == job.ref)

    @flaky.on_success
    def flaky_only(job: brook.CurrentJob, result: Any) -> None:
        note("flaky's own success", job.ref)

    @app.on_start(task="waits")
    def breaks(job: brook.CurrentJob) -> None:
        raise KeyError("a hook's own bug")

    refs = [flaky.enqueue(5), doomed.enqueue(), given_up.enqueue(), waits.enqueue()]
    _work(app, lambda: all(app.job(r).done for r in refs) and len(calls) >= 16)
    assert [app.job(r).state for r in refs] == ["acked", "dead", "dead", "acked"]
    assert app.job(refs[3]).result == 7, "a hook that raised changed the outcome"
    assert calls.count(("worker_start",)) == 1
    assert sorted(c for c in calls if c[0] == "start") == [
        ("start", "doomed", 1, True),
        ("start", "doomed", 2, True),
        ("start", "flaky", 1, True),
        ("start", "flaky", 2, True),
        ("start", "given_up", 1, True),
        ("start", "waits", 1, True),
    ]
    outcomes = sorted(c for c in calls if c[0] in ("success", "retry", "failure"))
    assert outcomes == [
        ("failure", "doomed", 2, "ValueError: never"),
        ("failure", "given_up", 1, "not ours"),
        ("retry", "doomed", 1, "ValueError: never"),
        ("retry", "flaky", 1, "RuntimeError: first time"),
        ("success", "flaky", 2, '{"n": 5}'),
        ("success", "waits", 1, "7"),
    ]
    assert ("flaky's own success", str(refs[0])) in calls
    assert calls.count(("failure's context", True)) == 2
    assert any(
        "hook on_start" in r.getMessage() and "breaks" in r.getMessage() for r in caplog.records
    )


def test_hooks_are_checked_when_declared(app: brook.App) -> None:
    with pytest.raises(ValueError, match="per process, not per task"):
        app.hooks.add("on_worker_start", lambda: None, "charge")
    with pytest.raises(TypeError, match="a hook is a function"):
        app.on_success(42)
    with pytest.raises(TypeError, match="task= is a task or its name"):
        app.on_start(lambda job: None, task=3)  # type: ignore[arg-type]


MODULE = """
import json, os
import brook

app = brook.App(os.environ["HOOKS_DATA"])
JOURNAL = os.environ["HOOKS_JOURNAL"]


def note(**fields):
    with open(JOURNAL, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), **fields}) + "\\n")


@app.on_worker_start
def pool():
    note(event="worker_start")


@app.on_start
def starting(job):
    note(event="start", ref=job.ref)


@app.task(isolation="process")
def apart(n):
    note(event="run", ref=brook.current_job().ref)
    return n
"""


def test_a_process_isolated_task_runs_its_hooks_in_its_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "hooked_app.py").write_text(MODULE)
    journal = tmp_path / "journal"
    monkeypatch.setenv("HOOKS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("HOOKS_JOURNAL", str(journal))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__("hooked_app")
    try:
        app = module.app
        refs = [module.apart.enqueue(n) for n in range(3)]
        _work(app, lambda: all(app.job(r).state == "acked" for r in refs))
        notes = [json.loads(line) for line in journal.read_text().splitlines()]
        app.close()
    finally:
        sys.modules.pop("hooked_app", None)
    here = [n for n in notes if n["pid"] == os.getpid()]
    assert [n["event"] for n in here] == ["worker_start"]  # the worker's own process
    children = [n for n in notes if n["pid"] != os.getpid()]
    for pid in {n["pid"] for n in children}:
        events = [n["event"] for n in children if n["pid"] == pid]
        assert events[0] == "worker_start" and events.count("worker_start") == 1, events
    started = sorted(n["ref"] for n in children if n["event"] == "start")
    assert started == sorted(str(r) for r in refs)
    assert sorted(n["ref"] for n in children if n["event"] == "run") == started
