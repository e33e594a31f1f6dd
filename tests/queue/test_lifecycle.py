"""The queue lifecycle under hypothesis: any sequence of calls and clock moves keeps its promises."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from brook.errors import LeaseExpired
from brook.queue import lifecycle as lc
from brook.queue.lifecycle import Backoff, Settings, State

SETTINGS = Settings(visibility_timeout_ms=1000, max_attempts=3, backoff=Backoff(100, 2.0, 1000))


class OneRecord(RuleBasedStateMachine):
    """One record, one clock, and callers holding every receipt ever handed out."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.job = lc.new_job(0)
        self.replayed = lc.new_job(0)
        """The job rebuilt from the transitions alone, as a restart would."""
        self.receipts: list[str] = []
        self.deliveries = 0
        self.trace: list[lc.Transition] = []
        self.rng = random.Random(0)

    def _apply(self, result: tuple[lc.Job, lc.Transition] | None) -> None:
        if result is not None:
            self.job, transition = result
            self.trace.append(transition)
            self.replayed = lc.replay(self.replayed, transition)

    @rule(ms=st.integers(0, 1500))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self._apply(lc.expire(self.job, SETTINGS, self.now))

    @precondition(lambda self: lc.is_available(self.job, self.now))
    @rule()
    def lease(self) -> None:
        self._apply(lc.expire(self.job, SETTINGS, self.now))
        if self.job.state is not State.READY:
            return  # the last attempt's lease expired: dead, not leasable
        receipt = f"r{len(self.receipts)}"
        self.receipts.append(receipt)
        self._apply(lc.lease(self.job, SETTINGS, self.now, receipt))
        self.deliveries += 1

    def _receipt(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(self.receipts))

    @precondition(lambda self: bool(self.receipts))
    @rule(
        data=st.data(),
        action=st.sampled_from(["ack", "nack", "extend", "discard", "release"]),
    )
    def settle(self, data: st.DataObject, action: str) -> None:
        receipt = self._receipt(data)
        live = (
            self.job.state is State.LEASED
            and self.job.receipt == receipt
            and self.now < self.job.lease_until_ms
        )
        try:
            if action == "ack":
                self._apply(lc.ack(self.job, receipt, self.now))
            elif action == "nack":
                self._apply(lc.nack(self.job, SETTINGS, receipt, self.now, "boom", None, self.rng))
            elif action == "extend":
                self._apply(lc.extend(self.job, receipt, self.now, 500))
            elif action == "release":
                self._apply(lc.release(self.job, receipt, self.now))
                self.deliveries -= 1  # never sent: no delivery, no attempt spent
            else:
                self._apply(lc.discard(self.job, receipt, self.now, "poison"))
        except LeaseExpired:
            assert not live, "a live receipt was refused"
            return
        assert live, f"a stale receipt was accepted for {action}"

    @precondition(lambda self: self.job.state is State.DEAD)
    @rule()
    def redrive(self) -> None:
        self._apply(lc.redrive(self.job, self.now))
        self.deliveries = 0

    @invariant()
    def attempts_stay_within_the_limit(self) -> None:
        assert self.job.attempt <= SETTINGS.max_attempts
        assert self.deliveries <= SETTINGS.max_attempts

    @invariant()
    def a_leased_record_holds_exactly_the_newest_receipt(self) -> None:
        if self.job.state is State.LEASED:
            assert self.job.receipt == self.receipts[-1]
        else:
            assert self.job.receipt is None

    @invariant()
    def the_status_log_rebuilds_exactly_this_job(self) -> None:
        assert self.replayed == self.job

    @invariant()
    def acked_is_final(self) -> None:
        states = [t.state for t in self.trace]
        if State.ACKED in states:
            assert states[-1] is State.ACKED and states.count(State.ACKED) == 1


TestOneRecord = OneRecord.TestCase


@given(st.integers(1, 40), st.floats(0, 1))
def test_backoff_grows_and_is_capped(attempt: int, jitter: float) -> None:
    backoff = Backoff(1000, 2.0, 300_000, jitter)
    delay = lc.retry_delay_ms(attempt, backoff, random.Random(attempt))
    full = min(300_000, 1000 * 2.0 ** (attempt - 1))
    assert full * (1 - jitter) - 1 <= delay <= full


def test_the_last_attempt_ends_dead_whichever_way_it_fails() -> None:
    job = lc.new_job(0)
    rng = random.Random(1)
    now = 0
    for attempt in range(1, SETTINGS.max_attempts + 1):
        job, _ = lc.lease(job, SETTINGS, now, f"r{attempt}")
        assert job.attempt == attempt
        if attempt < SETTINGS.max_attempts:
            job, moved = lc.nack(job, SETTINGS, f"r{attempt}", now, "boom", None, rng)
            assert moved.state is State.RETRYING and moved.until_ms > now
            now = moved.until_ms
            result = lc.expire(job, SETTINGS, now)
            assert result is not None
            job = result[0]
    result = lc.expire(job, SETTINGS, now + SETTINGS.visibility_timeout_ms)
    assert result is not None and result[0].state is State.DEAD
    assert "last attempt" in result[1].reason


def test_expire_after_makes_a_record_dead_whatever_its_state() -> None:
    settings = Settings(expire_after_ms=5000)
    job, _ = lc.lease(lc.new_job(0), settings, 0, "r")
    assert lc.expire(job, settings, 4999) is None
    result = lc.expire(job, settings, 5000)
    assert result is not None and result[0].state is State.DEAD
    with pytest.raises(LeaseExpired):
        lc.ack(result[0], "r", 5000)
