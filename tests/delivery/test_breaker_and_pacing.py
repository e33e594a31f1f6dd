"""An endpoint's circuit breaker and rate limit, under random outcomes and times."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.delivery import breaker as b
from brook.delivery.breaker import Breaker, State
from brook.delivery.pacing import Pacing


def test_the_breaker_opens_probes_and_closes() -> None:
    breaker = Breaker()
    now = 0
    for _ in range(b.FAILED_IN_A_ROW):
        assert breaker.allows(now)
        breaker.started()
        breaker.ended(True, now)
    assert breaker.state is State.OPEN and not breaker.allows(now + 1)
    now = breaker.open_until_ms
    assert breaker.allows(now)  # the probe
    assert breaker.started()
    assert not breaker.allows(now), "one probe at a time"
    breaker.ended(False, now)  # an attempt from before it opened: not the probe
    assert breaker.state is State.HALF_OPEN and not breaker.allows(now)
    breaker.ended(True, now, probe=True)
    assert breaker.state is State.OPEN and breaker.pause_ms == 2 * b.PAUSE_MS_MIN
    now = breaker.open_until_ms
    assert breaker.allows(now)
    breaker.ended(False, now, probe=breaker.started())
    assert breaker.state is State.CLOSED and breaker.pause_ms == b.PAUSE_MS_MIN


def test_a_mostly_failing_endpoint_opens_and_a_mostly_healthy_one_does_not() -> None:
    healthy = Breaker()
    for i in range(1000):
        healthy.ended(i % 3 == 0, i)  # a third fail, never 5 in a row
    assert healthy.state is State.CLOSED
    flaky = Breaker()
    for i in range(b.WINDOW):
        flaky.ended(i % 4 != 0, i)  # three quarters fail
        if flaky.state is State.OPEN:
            break
    assert flaky.state is State.OPEN


@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.integers(0, 20_000)), max_size=300))
def test_an_open_breaker_lets_one_probe_out_at_a_time(
    steps: list[tuple[bool, bool, int]],
) -> None:
    """Attempts overlap (several in flight); once it has opened, never more than one
    attempt started after the pause is in flight, until it closes again."""
    breaker = Breaker()
    now = 0
    in_flight: list[bool] = []  # for each attempt in flight: is it the probe?
    for start, failed, gap in steps:
        now += gap
        if start and breaker.allows(now):
            in_flight.append(breaker.started())
            assert sum(in_flight) <= 1, "two probes at once"
        elif in_flight:
            breaker.ended(failed, now, probe=in_flight.pop(0))
        assert b.PAUSE_MS_MIN <= breaker.pause_ms <= b.PAUSE_MS_MAX


@given(st.integers(1, 500), st.lists(st.floats(0, 50), min_size=1, max_size=400))
def test_no_second_holds_more_sends_than_the_rate(rate: int, gaps: list[float]) -> None:
    pacing = Pacing(rate)
    now = 0.0
    sent: list[float] = []
    for gap in gaps:
        now += gap
        wait = pacing.wait_ms(now)
        if wait:
            now += wait
        assert pacing.take(now)
        sent.append(now)
    for i, start in enumerate(sent):
        within = sum(1 for t in sent[i:] if t < start + 1000 - 1e-6)  # floats round
        assert within <= rate


def test_without_a_rate_every_send_may_start() -> None:
    pacing = Pacing(None)
    assert all(pacing.take(0.0) for _ in range(1000)) and pacing.wait_ms(0.0) == 0
