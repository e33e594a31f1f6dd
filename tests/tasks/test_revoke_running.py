"""`app.revoke(ref, terminate=True)` on a job that is running, through real `brook
worker` processes: an async run is cancelled and a process-isolated one killed, at
once, and the job ends dead with the reason, never to run again; a thread cannot be
stopped, so it runs to its end and then ends dead all the same."""

from __future__ import annotations

import time

import pytest

from tests.tasks.conftest import Workers
from tests.waiting import slow, wait_for


@pytest.mark.parametrize(
    ("task", "stopped"), [("nap_async", True), ("nap_process", True), ("nap_thread", False)]
)
def test_a_running_job_revoked_with_terminate_stops_and_ends_dead(
    workers: Workers, task: str, stopped: bool
) -> None:
    app = workers.app
    worker = workers.start("--concurrency", "2")
    workers.started(worker)
    seconds = 30.0 if stopped else 1.0
    ref = app.tasks[task].enqueue(task, seconds)
    workers.wait_for(lambda notes: any(n["event"] == "start" for n in notes))
    assert app.job(ref).state == "leased"
    asked = time.monotonic()
    assert app.revoke(ref, reason="customer cancelled", terminate=True) is False
    wait_for(lambda: app.job(ref).state == "dead", seconds=20, what="the job dead")
    took = time.monotonic() - asked
    status = app.job(ref)
    assert status.error == "customer cancelled"
    ends = [n for n in workers.notes() if n["event"] == "end"]
    if stopped:
        assert ends == [] and took < slow(5)
    else:
        assert len(ends) == 1, "a thread runs to its end"
    time.sleep(0.5)
    assert len([n for n in workers.notes() if n["event"] == "start"]) == 1, "never runs again"


def test_revoke_without_terminate_leaves_a_running_job_alone(workers: Workers) -> None:
    app = workers.app
    worker = workers.start()
    workers.started(worker)
    ref = app.tasks["nap_async"].enqueue("left", 0.5)
    workers.wait_for(lambda notes: any(n["event"] == "start" for n in notes))
    assert app.revoke(ref) is False
    workers.wait_for(lambda notes: any(n["event"] == "end" for n in notes))
    wait_for(lambda: app.job(ref).state == "acked", what="the job acked")
