"""How long a test waits for what the machine's speed decides: a process starting, a
lease ending, a record reaching a receiver. Every such wait is a bound, never a sleep,
and scales with the machine: by its load per core (the one-minute load average over
the cores, when above 1: on 2 cores at load 8, four times as long), read when the wait
starts, times BROOK_TEST_SLOWDOWN (default 1; 3 under a coverage tracer, which slows
every process without raising the load). A bound only costs its length when it runs
out, so a loaded machine gets slack and a quiet one a fast failure. A wait that runs
out says what it waited for, how long, and the slowdown it ran with.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

SLOWDOWN = float(os.environ.get("BROOK_TEST_SLOWDOWN", "1"))
if not SLOWDOWN >= 1:
    raise ValueError(f"BROOK_TEST_SLOWDOWN must be a number >= 1, not {SLOWDOWN}")


LOAD_SLOWDOWN_MAX = 8.0
"""Past this the machine is not busy but broken: a wait that long fails instead."""


def slowdown() -> float:
    """How much longer than on a quiet machine a wait may take now."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return SLOWDOWN * min(max(1.0, per_core), LOAD_SLOWDOWN_MAX)


def slow(seconds: float) -> float:
    """`seconds` as this machine's waits take them now."""
    return seconds * slowdown()


def wait_for(
    condition: Callable[[], object],
    seconds: float = 10.0,
    what: str | None = None,
    every_s: float = 0.01,
) -> None:
    """Return once `condition()` is true; fail (AssertionError) after `seconds`
    (scaled), saying what was awaited and for how long."""
    started = time.monotonic()
    factor = slowdown()
    deadline = started + seconds * factor
    while not condition():
        if time.monotonic() >= deadline:
            name = what or getattr(condition, "__name__", "the condition")
            raise AssertionError(
                f"{name} did not hold within {time.monotonic() - started:.1f} s "
                f"({seconds} s slowed {factor:.1f}x: BROOK_TEST_SLOWDOWN={SLOWDOWN:g} "
                "and the load)"
            )
        time.sleep(every_s)
