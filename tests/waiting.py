"""How long a test waits for what the machine's speed decides: a process starting, a
lease ending, a record reaching a receiver. Every such wait is a bound, never a sleep,
and scales with BROOK_TEST_SLOWDOWN (default 1): on a machine at load 8, or under a
coverage tracer, `BROOK_TEST_SLOWDOWN=3 make test` gives every wait three times as long
without touching what the tests assert. A wait that runs out says what it waited for,
how long, and the slowdown it ran with.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

SLOWDOWN = float(os.environ.get("BROOK_TEST_SLOWDOWN", "1"))
if not SLOWDOWN >= 1:
    raise ValueError(f"BROOK_TEST_SLOWDOWN must be a number >= 1, not {SLOWDOWN}")


def slow(seconds: float) -> float:
    """`seconds` as this machine's waits take them."""
    return seconds * SLOWDOWN


def wait_for(
    condition: Callable[[], object],
    seconds: float = 10.0,
    what: str | None = None,
    every_s: float = 0.01,
) -> None:
    """Return once `condition()` is true; fail (AssertionError) after `seconds`
    (scaled), saying what was awaited and for how long."""
    started = time.monotonic()
    deadline = started + slow(seconds)
    while not condition():
        if time.monotonic() >= deadline:
            name = what or getattr(condition, "__name__", "the condition")
            raise AssertionError(
                f"{name} did not hold within {time.monotonic() - started:.1f} s "
                f"({seconds} s at BROOK_TEST_SLOWDOWN={SLOWDOWN:g})"
            )
        time.sleep(every_s)
