"""The worker in this process over an embedded broker: what it tells (honest logs,
`brook.current_job()`), and how it ends when one of its loops keeps failing."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from brook import limits
from brook.tasks.worker import Worker
from tests.waiting import slow


@pytest.fixture
def app(tmp_path: Path) -> Iterator[brook.App]:
    application = brook.App(str(tmp_path / "data"))
    yield application
    application.close()


def _running(worker: Worker) -> tuple[threading.Thread, list[int]]:
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run(install_signals=False)))
    thread.start()
    return thread, codes


def _until(check: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + slow(timeout)
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_done_is_logged_only_once_the_ack_landed(
    app: brook.App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task(visibility_timeout_ms=1_000)
    def slow() -> str:
        time.sleep(1.5)
        return "ran"

    ref = slow.enqueue()
    worker = Worker(app, concurrency=1, poll_s=0.1)
    worker._leases_step = lambda: 60.0  # type: ignore[method-assign]  # its lease runs out
    caplog.set_level(logging.INFO, logger="brook.worker")
    thread, codes = _running(worker)
    _until(lambda: worker.stats.ack_failures or worker.stats.lost_leases)
    worker.stop()
    thread.join(30)
    assert codes == [0]
    lines = [r.getMessage() for r in caplog.records if str(ref) in r.getMessage()]
    assert any("ran, but its ack failed: it will run again" in line for line in lines), lines
    assert not any(line.endswith(" done") or " done in " in line for line in lines), lines
    assert app.job(ref).state != "acked"


def test_a_task_sees_its_job(app: brook.App) -> None:
    seen: list[brook.CurrentJob] = []

    @app.task(timeout_ms=5_000)
    def sync_one() -> None:
        seen.append(brook.current_job())

    @app.task
    async def async_one() -> None:
        await asyncio.sleep(0)
        seen.append(brook.current_job())

    refs = [sync_one.options(key="k-1").enqueue(), async_one.enqueue()]
    worker = Worker(app, concurrency=2, poll_s=0.1)
    thread, _ = _running(worker)
    _until(lambda: len(seen) == 2)
    worker.stop()
    thread.join(30)
    by_task = {job.task: job for job in seen}
    assert by_task["sync_one"].ref == str(refs[0]) and by_task["sync_one"].key == "k-1"
    assert by_task["sync_one"].key_bytes == b"k-1" and by_task["async_one"].key is None
    assert by_task["sync_one"].attempt == 1
    left = by_task["sync_one"].time_left()
    assert left is not None and 0 < left <= 5.0
    assert by_task["async_one"].ref == str(refs[1]) and by_task["async_one"].deadline is None
    with pytest.raises(RuntimeError, match="no job is running here"):
        brook.current_job()


def test_a_loop_that_keeps_failing_ends_the_worker_with_exit_1(
    app: brook.App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task
    def noop() -> None:
        return None

    monkeypatch.setattr(limits, "worker_loop_failures_max", 3)
    monkeypatch.setattr(limits, "background_retry_ms_min", 1)
    worker = Worker(app, concurrency=1, poll_s=0.1)

    def broken() -> float:
        raise RuntimeError("a bug in a loop")

    worker._leases_step = broken  # type: ignore[method-assign]
    caplog.set_level(logging.INFO, logger="brook.worker")
    thread, codes = _running(worker)
    thread.join(30)
    assert codes == [1]
    assert any("times in a row" in r.getMessage() for r in caplog.records)
