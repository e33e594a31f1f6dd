"""A worker whose API key covers only its tasks' topics (`tasks.*`) runs its jobs, and its
side channels (the announcements on tasks-workers, the revocations on tasks-revoked) are
refused quietly: said once, never a failing loop that would stop the worker."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import brook
from brook.config import key_stanza
from brook.tasks.announce import Announcer
from brook.tasks.revocations import Reader
from tests.served import SRC, Served
from tests.tasks.conftest import Running
from tests.waiting import slow

KEY = "key-of-a-worker-limited-to-its-tasks"


def test_a_worker_with_a_key_for_its_tasks_only_runs_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "brook.toml"
    config.write_text(key_stanza("billing", KEY, ["produce", "consume"], ["tasks.*"]))
    served = Served(tmp_path / "data", config=config)
    app = brook.App(f"http://127.0.0.1:{served.port}", api_key=KEY)
    try:

        @app.task
        def double(x: int) -> int:
            return 2 * x

        announcer = Announcer(lambda: app.broker, ["double"], 2, lambda: (0, []))
        reader = Reader(lambda: app.broker, lambda ref, reason: None)
        with caplog.at_level(logging.WARNING, logger="brook.worker"):
            assert announcer.step() > 0 and announcer.step() > 0
            assert reader.step() > 0 and reader.step() > 0
        said = [r.getMessage() for r in caplog.records]
        assert sum("not shown on the dashboard" in m for m in said) == 1
        assert sum("cannot reach this worker" in m for m in said) == 1
        with Running(app, concurrency=2) as running:
            assert app.result(double.enqueue(21), timeout=slow(30)) == 42
            assert running.thread.is_alive()
    finally:
        app.close()
        served.close()


def test_brook_worker_takes_its_key_from_the_environment(tmp_path: Path) -> None:
    """The App's code names no key; the unit file gives BROOK_API_KEY (docs/TASKS.md,
    "Under systemd"), and every process of `--processes` uses it."""
    config = tmp_path / "brook.toml"
    config.write_text(key_stanza("billing", KEY, ["produce", "consume"], ["tasks.*"]))
    served = Served(tmp_path / "data", config=config)
    url = f"http://127.0.0.1:{served.port}"
    (tmp_path / "keyless_app.py").write_text(
        f"import brook\napp = brook.App({url!r})\n\n\n@app.task\ndef triple(x):\n    return 3 * x\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{SRC}", "BROOK_API_KEY": KEY}
    env.pop("BROOK_URL", None)
    worker = subprocess.Popen(
        [sys.executable, "-m", "brook.cli", "worker", "keyless_app:app", "--processes", "2"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    app = brook.App(url, api_key=KEY)
    try:

        @app.task
        def triple(x: int) -> int:
            return 3 * x

        refs = [triple.enqueue(i) for i in range(6)]
        assert [app.result(ref, timeout=slow(60)) for ref in refs] == [0, 3, 6, 9, 12, 15]
        assert worker.poll() is None
    finally:
        os.kill(worker.pid, signal.SIGTERM)
        worker.wait(slow(60))
        app.close()
        served.close()
