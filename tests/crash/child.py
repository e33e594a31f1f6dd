"""Running a child process that reports what it did, and killing it with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

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
        env={**os.environ, "PYTHONPATH": SRC},
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
