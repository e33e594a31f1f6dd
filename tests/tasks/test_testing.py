"""`app.testing()`: tasks run in the test's thread on an in-memory broker whose clock
the test moves, as a user's unit tests use it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import brook


def _billing(location: str) -> tuple[brook.App, dict[str, Any]]:
    app = brook.App(location)
    seen: dict[str, Any] = {"attempts": {}, "hooks": []}

    @app.task(max_attempts=3)  # the default backoff: 1 s, then 2 s
    def charge(order: str, amount: int) -> dict[str, Any]:
        job = brook.current_job()
        seen["attempts"][order] = job.attempt
        if order == "flaky" and job.attempt < 3:
            raise RuntimeError("the provider timed out")
        if order == "bad":
            raise ValueError("no such card")
        receipt.enqueue(order)  # a job that enqueues the next one
        return {"order": order, "charged": amount}

    @app.task
    async def receipt(order: str) -> str:
        await asyncio.sleep(0)
        return f"receipt for {order}"

    @app.on_failure
    def failed(job: brook.CurrentJob, error: str) -> None:
        seen["hooks"].append((job.task, job.attempt, error.splitlines()[0]))

    seen["charge"], seen["receipt"] = charge, receipt
    return app, seen


def test_drain_runs_everything_due_fast_forwarding_delays_and_backoff(tmp_path: Path) -> None:
    app, seen = _billing(str(tmp_path / "never-opened"))
    charge = seen["charge"]
    with app.testing() as t:
        started = t.clock.time()
        ok = charge.enqueue("o-1", 100)
        flaky = charge.enqueue("flaky", 5)
        later = charge.options(delay_ms=3_600_000).enqueue("later", 1)
        bad = charge.enqueue("bad", 7)
        ran = t.drain()
        assert app.result(ok, timeout=0) == {"order": "o-1", "charged": 100}
        assert app.result(flaky, timeout=0) == {"order": "flaky", "charged": 5}
        assert app.result(later, timeout=0)["order"] == "later"
        with pytest.raises(brook.TaskFailed, match="ValueError: no such card"):
            app.result(bad, timeout=0)
        assert seen["attempts"] == {"o-1": 1, "flaky": 3, "later": 1, "bad": 3}
        assert seen["hooks"] == [("charge", 3, "ValueError: no such card")]
        # Each charge that succeeded enqueued its receipt, run in the same drain.
        receipts = app.broker.queue("tasks.receipt", "tasks").stats()
        assert receipts["acked"] == 3
        assert ran == 1 + 3 + 1 + 3 + 3
        assert t.clock.time() - started >= 3600, "the delay was not reached"
        assert t.drain() == 0
    assert not (tmp_path / "never-opened").exists(), "testing touched the real location"
    assert app.location == str(tmp_path / "never-opened")


def test_each_block_starts_empty_and_the_clock_moves_only_when_told(tmp_path: Path) -> None:
    app, seen = _billing("memory://")
    charge = seen["charge"]
    with app.testing() as t:
        ref = charge.options(delay_ms=60_000).enqueue("o-1", 1)
        t.advance(30)
        assert t.drain() == 2  # the clock is moved to the delay by the drain itself
        assert app.job(ref).state == "acked"
        with pytest.raises(ValueError, match="forward only"):
            t.advance(-1)
    with app.testing() as t:
        assert app.broker.topics() == []
        assert t.drain() == 0


def test_a_job_that_enqueues_itself_for_ever_stops_the_drain(tmp_path: Path) -> None:
    app = brook.App("memory://")

    @app.task
    def again() -> None:
        again.enqueue()

    with app.testing() as t:
        again.enqueue()
        with pytest.raises(RuntimeError, match="drain ran 50 jobs and more are due"):
            t.drain(max_jobs=50)


def test_a_job_of_a_task_the_app_does_not_declare_ends_dead_saying_so() -> None:
    app = brook.App("memory://")

    @app.task
    def known() -> None:
        return None

    with app.testing() as t:
        ref = app.send_task("unknown", queue="tasks.known")
        t.drain()
        with pytest.raises(brook.TaskFailed, match=r"no task named unknown \(the app has: known\)"):
            app.result(ref, timeout=0)


def test_a_revoked_job_is_not_run_by_the_drain() -> None:
    app = brook.App("memory://")
    ran: list[int] = []

    @app.task
    def work(n: int) -> None:
        ran.append(n)

    with app.testing() as t:
        refs = [work.enqueue(n) for n in range(3)]
        assert app.revoke(refs[1]) is True
        assert t.drain() == 2
        assert ran == [0, 2]
        with pytest.raises(brook.TaskFailed, match="revoked"):
            app.result(refs[1], timeout=0)
