"""When to try again: one pure function for every retry loop Brook has.

A queue group's record after a failed attempt, an endpoint's delivery, a background
loop that failed, a child process that died, a task worker's released job, the
client resending a request nobody answered, the Spark sink waiting out a restart:
each waits `retry_delay(policy, attempt, rng)`, with its own `Backoff` policy
(brook/models.py; the policies' numbers are in brook/limits.py). As River's
`next_retry_at`, it takes everything it depends on as arguments, so tests and the
seeded simulations drive it exactly.
"""

from __future__ import annotations

import random

from brook.models import Backoff


def retry_delay(policy: Backoff, attempt: int, rng: random.Random | None = None) -> int:
    """Milliseconds to wait after attempt number `attempt` failed (1-based; 0 counts
    as 1): `min_ms * factor ** (attempt - 1)`, at most `max_ms`, less up to
    `jitter` of it taken off at random by `rng` (so retries of many callers spread
    out). Without `rng` the full delay, no jitter. Pure given `rng`; never negative."""
    exponent = max(attempt, 1) - 1
    try:
        full = min(float(policy.max_ms), policy.min_ms * policy.factor**exponent)
    except OverflowError:  # a factor of 10 and attempt 400: the cap, not an error
        full = float(policy.max_ms)
    if rng is not None and policy.jitter:
        full *= 1 - policy.jitter * rng.random()
    return max(0, round(full))


def doubling(min_ms: int, max_ms: int) -> Backoff:
    """The policy of Brook's own loops: `min_ms`, then twice as long each time, at most
    `max_ms`, no jitter."""
    return Backoff(min_ms=min_ms, factor=2.0, max_ms=max_ms, jitter=0.0)
