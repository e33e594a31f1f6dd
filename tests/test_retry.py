"""retry_delay: the one retry timing every loop of Brook's uses (brook/retry.py)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from brook.models import Backoff
from brook.retry import doubling, retry_delay

POLICIES = st.builds(
    Backoff,
    min_ms=st.integers(0, 10**6),
    factor=st.floats(1.0, 100.0),
    max_ms=st.integers(0, 10**9),
    jitter=st.floats(0.0, 1.0),
)


@given(POLICIES, st.integers(-5, 5_000), st.integers(0, 2**32))
def test_the_delay_is_within_the_policy(policy: Backoff, attempt: int, seed: int) -> None:
    full = retry_delay(policy, attempt)
    assert 0 <= full <= max(policy.max_ms, 0)
    jittered = retry_delay(policy, attempt, random.Random(seed))
    assert full * (1 - policy.jitter) - 1 <= jittered <= full
    assert retry_delay(policy, attempt, random.Random(seed)) == jittered  # pure given the rng


@given(POLICIES, st.integers(1, 5_000))
def test_the_delay_never_shrinks_from_one_attempt_to_the_next(
    policy: Backoff, attempt: int
) -> None:
    assert retry_delay(policy, attempt) <= retry_delay(policy, attempt + 1)


def test_doubling_starts_at_its_least_and_stops_at_its_most() -> None:
    policy = doubling(100, 1_000)
    assert [retry_delay(policy, n) for n in range(0, 7)] == [100, 100, 200, 400, 800, 1000, 1000]
    assert retry_delay(policy, 10**6) == 1000  # no overflow, however many failures
