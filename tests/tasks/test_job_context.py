"""`brook.tasks.JobContext`: every line a task logs names its job and attempt, in an
embedded worker with the user's own handler and in a real `brook worker` process
whose logging the user left alone."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import brook
from brook.tasks import context
from brook.tasks.worker import Worker
from tests.environment import unmeasured
from tests.served import SRC, Served
from tests.waiting import slow, wait_for


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept() -> Iterator[Kept]:
    handler = Kept()
    handler.addFilter(brook.JobContext())
    logger = logging.getLogger("billing")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)


def test_the_filter_names_the_job_inside_and_a_placeholder_outside(kept: Kept) -> None:
    log = logging.getLogger("billing")
    log.info("before")
    token = context.enter(context.CurrentJob("tasks.charge/0/7", "charge", 2, None, None))
    try:
        log.info("inside")
    finally:
        context.leave(token)
    before, inside = kept.records
    assert (before.job, before.attempt, before.task) == ("-", "-", "-")  # type: ignore[attr-defined]
    assert (inside.job, inside.attempt, inside.task) == ("tasks.charge/0/7", 2, "charge")  # type: ignore[attr-defined]
    formatted = logging.Formatter("%(job)s #%(attempt)s %(message)s").format(inside)
    assert formatted == "tasks.charge/0/7 #2 inside"
    bare = logging.LogRecord("x", logging.INFO, "f", 1, "m", None, None)
    assert brook.JobContext(missing=None).filter(bare) and not hasattr(bare, "job")


def test_each_line_a_task_logs_carries_its_job_and_attempt(tmp_path: Path, kept: Kept) -> None:
    app = brook.App(str(tmp_path / "data"))
    tries: dict[str, int] = {}

    @app.task(max_attempts=3, backoff={"min_ms": 10, "max_ms": 20})
    def charge(order: str) -> None:
        tries[order] = tries.get(order, 0) + 1
        logging.getLogger("billing").info("charging %s", order)
        if order == "o-2" and tries[order] == 1:
            raise RuntimeError("card declined")

    refs = {order: charge.enqueue(order) for order in ("o-1", "o-2")}
    worker = Worker(app, concurrency=2)
    thread = threading.Thread(target=lambda: worker.run(install_signals=False))
    thread.start()
    try:
        wait_for(lambda: all(app.job(r).state == "acked" for r in refs.values()), 20)
    finally:
        worker.stop()
        thread.join(30)
        app.close()
    lines = {(r.getMessage(), r.job, r.attempt) for r in kept.records}  # type: ignore[attr-defined]
    assert lines == {
        ("charging o-1", str(refs["o-1"]), 1),
        ("charging o-2", str(refs["o-2"]), 1),
        ("charging o-2", str(refs["o-2"]), 2),
    }


APP = """
import logging, os
import brook

app = brook.App(os.environ["BROOK_URL"])
log = logging.getLogger("billing")

@app.task
def charge(order):
    log.info("charging %s", order)
"""


def test_brook_worker_logs_a_tasks_lines_with_the_job(tmp_path: Path) -> None:
    served = Served(tmp_path / "data")
    url = f"http://127.0.0.1:{served.port}"
    (tmp_path / "billing.py").write_text(APP)
    env = {**unmeasured(), "PYTHONPATH": f"{tmp_path}:{SRC}", "BROOK_URL": url}
    app = brook.App(url)
    worker = subprocess.Popen(
        [sys.executable, "-m", "brook.cli", "worker", "billing:app"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        @app.task(name="charge")
        def charge(order: str) -> None: ...

        ref = charge.enqueue("o-1")
        app.result(ref, timeout=slow(30))
        time.sleep(0.2)  # the line is written before the ack; give stderr a moment
    finally:
        worker.terminate()
        _, stderr = worker.communicate(timeout=60)
        app.close()
        served.close()
    assert worker.returncode == 0, stderr
    entries = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    (mine,) = [e for e in entries if e["logger"] == "billing"]
    assert mine["msg"] == "charging o-1"
    assert (mine["job"], mine["attempt"], mine["task"]) == (str(ref), 1, "charge")
    # Its own calls to the broker are not logged line by line (httpx logs each at info).
    assert not [e for e in entries if e["logger"].startswith(("httpx", "httpcore"))]
    # The worker's own lines outside a job carry no empty job field.
    assert any(e["logger"].startswith("brook") and "job" not in e for e in entries), entries
