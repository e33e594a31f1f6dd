"""Dead jobs of a task, grouped as an operator reads them: one group per exception and
line of the task's own code, whatever ids the messages carry, and no frame of Brook's."""

from __future__ import annotations

import inspect
import os
import threading
import time
from collections.abc import Iterator

import pytest

import brook
from brook.tasks.worker import Worker
from tests.waiting import slow

BROOK_DIR = os.path.dirname(os.path.abspath(brook.__file__)) + os.sep


@pytest.fixture
def app() -> Iterator[brook.App]:
    application = brook.App("memory://")
    yield application
    application.close()


def test_five_customers_failing_alike_are_one_group_at_the_tasks_line(app: brook.App) -> None:
    @app.task(max_attempts=1)
    def charge(job: int) -> None:
        raise ValueError(f"no customer {job}")

    raising = inspect.getsourcelines(charge.fn)[1] + 2  # the line of `raise`
    refs = [charge.enqueue(job) for job in range(5)]
    worker = Worker(app, concurrency=2)
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False})
    thread.start()
    try:
        deadline = time.monotonic() + slow(20)
        while not all(app.job(ref).done for ref in refs) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        worker.stop()
        thread.join(timeout=30)
    errors = [app.job(ref).error for ref in refs]
    assert all(app.job(ref).state == "dead" for ref in refs), errors
    for job, error in enumerate(errors):
        head, *frames = error.split("\n")
        assert head == f"ValueError: no customer {job}"
        assert frames, "the task's own frame is kept"
        assert frames[-1] == f"  {__file__}:{raising} in charge"
        files = [frame.strip().rsplit(":", 1)[0] for frame in frames]
        assert not [f for f in files if os.path.abspath(f).startswith(BROOK_DIR)], error

    queue = app.broker.queue(refs[0].topic, "tasks", create=False)
    assert isinstance(queue, brook.Queue)  # embedded: its dead errors are a look of its own
    groups = queue.dead_errors()
    name = os.path.basename(__file__)
    assert [(g.group, g.dead) for g in groups] == [(f"ValueError at {name}:{raising} in charge", 5)]
    assert groups[0].example in errors
    # Redriven by its group: all five go back to work.
    found = queue.dead_records(groups[0].group)
    assert queue.redrive(records=[(d.partition, d.offset) for d in found]) == 5
    assert queue.dead_errors() == []


def test_a_failure_inside_the_standard_library_is_grouped_at_the_tasks_own_line() -> None:
    """json failing inside a task's call: the innermost frame kept is the task's, so such
    failures across an app are not all one group at json's encoder.py."""
    import json

    from brook.queue.error_groups import error_group
    from brook.tasks.payload import error_summary

    def log_key(key: bytes) -> str:
        return json.dumps({"key": key})

    try:
        log_key(b"cust-9")
    except TypeError as exc:
        summary = error_summary(exc)
    assert "encoder.py" not in summary and "json" not in summary.split("\n", 1)[1]
    assert error_group(summary).endswith("in log_key")
