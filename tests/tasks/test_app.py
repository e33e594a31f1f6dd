"""brook.App embedded (a directory, no server): what a task's author meets, in-process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.errors import BadRequest
from brook.tasks.worker import Worker


@pytest.fixture
def app(tmp_path: Path) -> Iterator[brook.App]:
    application = brook.App(str(tmp_path / "data"))
    yield application
    application.close()


def _run(app: brook.App, until: Any, timeout: float = 10.0) -> None:
    worker = Worker(app, concurrency=4)
    thread = threading.Thread(target=lambda: worker.run(install_signals=False))
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not until() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert until(), "the jobs did not finish"
    finally:
        worker.stop()
        thread.join(timeout=30)


def test_retry_and_discard_are_a_tasks_own_words(app: brook.App) -> None:
    tries: list[int] = []

    @app.task(max_attempts=5, backoff={"min_ms": 10, "max_ms": 10})
    def flaky(n: int) -> int:
        tries.append(n)
        if len(tries) < 3:
            raise brook.Retry("not yet", delay_ms=20)
        return n * 10

    @app.task(max_attempts=5)
    def hopeless(n: int) -> None:
        raise brook.Discard(f"order {n} was cancelled")

    done, given_up = flaky.enqueue(4), hopeless.enqueue(5)
    _run(app, lambda: app.job(done).done and app.job(given_up).done)
    assert (app.job(done).state, app.job(done).attempts, app.job(done).result) == ("acked", 3, 40)
    dead = app.job(given_up)
    assert (dead.state, dead.attempts, dead.error) == ("dead", 1, "order 5 was cancelled")


def test_what_a_task_returns_is_kept_if_it_can_be(app: brook.App) -> None:
    @app.task
    def big() -> str:
        return "x" * 100_000

    @app.task
    def odd() -> object:
        return object()

    refs = [big.enqueue(), odd.enqueue()]
    _run(app, lambda: all(app.job(r).done for r in refs))
    assert [(app.job(r).state, app.job(r).result) for r in refs] == [("acked", None)] * 2


def test_references_and_bad_input(app: brook.App) -> None:
    @app.task(name="billing.charge")
    def charge(order: str, amount: int = 0) -> None: ...

    ref = charge.enqueue("o-1", amount=3, idempotency_key="order-1")
    assert charge.enqueue("o-1", amount=3, idempotency_key="order-1") == ref
    assert brook.JobRef.parse(str(ref)) == ref
    assert str(ref) == "tasks.billing.charge/0/0"
    assert app.job(str(ref)).state == "ready"
    with pytest.raises(BadRequest, match="JSON"):
        charge.enqueue(object())
    with pytest.raises(BadRequest, match="job reference"):
        app.job("nonsense")
    with pytest.raises(ValueError, match="two tasks"):
        app.task(charge.fn, name="billing.charge")
    with pytest.raises(ValueError, match="not a valid name"):
        app.task(lambda: None, name="no spaces")
    with pytest.raises(ValueError, match="cron= or every_ms="):
        app.periodic(lambda: None, name="p")
    assert app.job(brook.JobRef("tasks.nothing", 0, 0)).state == "unknown"


def test_the_settlers_settle_every_finished_job_at_once(app: brook.App) -> None:
    """Many jobs finishing on many threads, four settlers gathering batches: no finished
    job waits in the worker for the next one to finish (a settle held for a visibility
    timeout would let the job run again). Rounds until 2 s have passed: the race it
    guards against (a timed get that never returns) shows within a few hundred."""

    @app.task
    def noop() -> None:
        return None

    worker = Worker(app, concurrency=64)
    settled = [0]
    counting = threading.Lock()

    def settle(batch: list[Any]) -> None:
        with counting:
            settled[0] += len(batch)

    worker._settle = settle  # type: ignore[method-assign]
    settlers = [threading.Thread(target=worker._settle_loop, daemon=True) for _ in range(4)]
    for settler in settlers:
        settler.start()

    def finish(count: int) -> None:
        for n in range(count):
            worker._finished.put(object())  # type: ignore[arg-type]
            if n % 7 == 0:
                time.sleep(0.0001)

    sent, rounds, until = 0, 0, time.monotonic() + 2.0
    try:
        while time.monotonic() < until:
            finishers = [threading.Thread(target=finish, args=(100,)) for _ in range(16)]
            for finisher in finishers:
                finisher.start()
            for finisher in finishers:
                finisher.join()
            sent += 1600
            rounds += 1
            deadline = time.monotonic() + 1.0
            while settled[0] < sent and time.monotonic() < deadline:
                time.sleep(0.001)
            assert settled[0] == sent, f"round {rounds}: {sent - settled[0]} jobs left unsettled"
    finally:
        for _ in settlers:
            worker._finished.put(None)
        for settler in settlers:
            settler.join(timeout=5)
