"""Running a child process that reports what it did, and killing it with SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.environment import unmeasured

SRC = str(Path(__file__).parents[2] / "src")


def run_and_kill(
    script: Path, args: list[str], delay_s: float, before: Callable[[], None] | None = None
) -> list[str]:
    """Start `script` with `args`; once it prints READY, let it run `delay_s`, call
    `before` (to kill something else first), kill it with SIGKILL, and return the
    lines it reported. A line cut by the kill was never fully reported: left out."""
    child = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        env={**unmeasured(), "PYTHONPATH": SRC},
    )
    try:
        assert child.stdout is not None
        first = child.stdout.readline()
        assert first == b"READY\n", f"{script.name} did not start: {first!r}"
        time.sleep(delay_s)
        if before is not None:
            before()
        child.send_signal(signal.SIGKILL)
        out = child.stdout.read()
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    return out.decode().split("\n")[:-1]


def run_and_kill_broker(
    script: Path, data: Path, args: list[str], delay_s: float, served: bool
) -> list[str]:
    """Run `script DATA_OR_URL *args` and kill -9 the broker it uses: the script itself
    when it opens `data` (embedded), else a `brook serve` on `data` that it reaches by
    URL (killed first, then the script). Returns the lines the script reported."""
    from tests.served import Served

    server = Served(data) if served else None
    where = f"http://127.0.0.1:{server.port}" if server is not None else str(data)

    def kill_server() -> None:
        if server is not None:
            server.process.send_signal(signal.SIGKILL)
            server.process.wait()

    try:
        return run_and_kill(script, [where, *args], delay_s, before=kill_server)
    finally:
        if server is not None:
            server.close()
