"""The flush decision is a pure function; these are its promises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.commit.policy import flush_delay

LINGER = 0.002
MAX = 1 << 20


def test_a_lone_producer_is_written_at_once() -> None:
    assert (
        flush_delay(10.0, 10.0, 1, 100, previous_requests=1, linger_s=LINGER, batch_bytes_max=MAX)
        == 0
    )


def test_a_batch_lingers_for_more_producers_than_last_time() -> None:
    delay = flush_delay(
        10.0, 10.0, 3, 300, previous_requests=64, linger_s=LINGER, batch_bytes_max=MAX
    )
    assert delay == LINGER


def test_once_everyone_from_last_time_is_back_it_is_written() -> None:
    assert (
        flush_delay(
            10.0, 10.0, 64, 6400, previous_requests=64, linger_s=LINGER, batch_bytes_max=MAX
        )
        == 0
    )


def test_a_request_after_a_quiet_spell_is_written_at_once() -> None:
    """Light load: rounds of two (an append and a queue's status entry) now and then, and
    a lone append after a pause does not wait for a second one that is not coming."""
    kept = dict(previous_requests=2, linger_s=LINGER, batch_bytes_max=MAX)
    assert flush_delay(10.0, 10.0, 1, 100, quiet_s=0.020, **kept) == 0  # type: ignore[arg-type]
    assert flush_delay(10.0, 10.0, 1, 100, quiet_s=0.0005, **kept) == LINGER  # type: ignore[arg-type]


def test_a_full_batch_is_written_at_once() -> None:
    assert (
        flush_delay(10.0, 10.0, 2, MAX, previous_requests=64, linger_s=LINGER, batch_bytes_max=MAX)
        == 0
    )


def test_while_the_disk_syncs_a_batch_gathers_even_once_as_many_as_last_time_came() -> None:
    """A steady stream: rounds of one must not stay rounds of one (any round size was a
    fixed point of "as many as last time"); while the last round syncs, the next gathers."""
    kept = dict(previous_requests=1, linger_s=LINGER, batch_bytes_max=MAX)
    assert flush_delay(10.0, 10.0, 5, 500, syncing=True, **kept) == LINGER  # type: ignore[arg-type]
    assert flush_delay(10.0, 10.0, 5, 500, syncing=False, **kept) == 0  # type: ignore[arg-type]
    # ... but never past the linger, nor past the batch's bytes.
    assert flush_delay(10.003, 10.0, 5, 500, syncing=True, **kept) == 0  # type: ignore[arg-type]
    assert flush_delay(10.0, 10.0, 5, MAX, syncing=True, **kept) == 0  # type: ignore[arg-type]


@given(
    st.floats(0, 1e6),
    st.floats(0, 1),
    st.integers(1, 10_000),
    st.integers(0, 2 * MAX),
    st.integers(1, 10_000),
    st.booleans(),
)
def test_never_waits_past_the_linger(
    now: float, age: float, pending: int, size: int, previous: int, syncing: bool
) -> None:
    first = now - age
    delay = flush_delay(now, first, pending, size, previous, LINGER, MAX, syncing=syncing)
    assert 0 <= delay <= LINGER
    # The age the policy sees is now - first, which rounding can make a hair under `age`.
    if now - first >= LINGER:
        assert delay == 0
