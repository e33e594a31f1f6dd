"""The queue lifecycle under hypothesis: any sequence of calls and clock moves keeps its promises."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from brook.errors import BadRequest, LeaseExpired
from brook.models import Backoff, State
from brook.queue import lifecycle as lc
from brook.queue.lifecycle import Settings
from brook.retry import retry_delay

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
        action=st.sampled_from(["ack", "nack", "extend", "discard", "release", "release later"]),
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
            elif action == "release later":
                delay = data.draw(st.integers(1, 1500), label="delay_ms")
                self._apply(lc.release(self.job, receipt, self.now, "not mine", delay))
                self.deliveries -= 1
                assert self.job.state is State.RETRYING
                assert self.job.ready_at_ms == self.now + delay
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
    def the_attempt_counts_deliveries_not_released(self) -> None:
        if self.job.state is not State.DEAD:
            assert self.job.attempt == self.deliveries

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
    delay = retry_delay(backoff, attempt, random.Random(attempt))
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


def test_release_gives_the_attempt_back_at_once_or_later() -> None:
    job, _ = lc.lease(lc.new_job(0), SETTINGS, 0, "r1")
    failed, _ = lc.nack(job, SETTINGS, "r1", 10, "boom", 0, random.Random(0))
    due = lc.expire(failed, SETTINGS, 10)
    assert due is not None
    job, _ = lc.lease(due[0], SETTINGS, 10, "r2")
    assert job.attempt == 2
    now, _ = lc.release(job, "r2", 20, "not mine")
    assert (now.state, now.attempt, now.ready_at_ms, now.error) == (State.READY, 1, 20, "boom")
    later, moved = lc.release(job, "r2", 20, "not mine", 500)
    assert (later.state, later.attempt, later.ready_at_ms) == (State.RETRYING, 1, 520)
    assert later.error == "boom", "a release is no failure: the last error stays"
    assert moved == lc.Transition(20, State.RETRYING, 1, "not mine", "r2", 520)
    assert lc.is_available(later, 519) is False
    assert lc.expire(later, SETTINGS, 519) is None
    due = lc.expire(later, SETTINGS, 520)
    assert due is not None and due[0].state is State.READY and due[0].attempt == 1
    assert due[0].error == "boom"
    again, _ = lc.lease(due[0], SETTINGS, 520, "r3")
    assert again.attempt == 2, "the next lease has the attempt number the released one had"
    zero, _ = lc.release(job, "r2", 20, "not mine", 0)
    assert zero == now, "a delay of 0 is no delay"


def test_release_refuses_a_negative_delay_and_a_stale_receipt() -> None:
    job, _ = lc.lease(lc.new_job(0), SETTINGS, 0, "r1")
    with pytest.raises(BadRequest, match="delay_ms"):
        lc.release(job, "r1", 10, "not mine", -1)
    with pytest.raises(LeaseExpired):
        lc.release(job, "r0", 10, "not mine", 100)
    with pytest.raises(LeaseExpired):
        lc.release(job, "r1", SETTINGS.visibility_timeout_ms, "not mine", 100)


def test_a_record_released_for_later_from_its_first_lease_is_no_redrive_when_due() -> None:
    """Released later from attempt 1, it is due again at attempt 0: its "retry due"
    transition must replay as that, not as a redrive (which is also READY at 0)."""
    job = replayed = lc.new_job(7)
    job, t1 = lc.lease(job, SETTINGS, 10, "r1")
    job, t2 = lc.release(job, "r1", 20, "not mine", 100)
    result = lc.expire(job, SETTINGS, 120)
    assert result is not None
    job, t3 = result
    for transition in (t1, t2, t3):
        replayed = lc.replay(replayed, transition)
    assert replayed == job
    assert (job.state, job.attempt, job.lives, job.since_ms) == (State.READY, 0, 0, 7)


def test_a_nack_replays_as_before() -> None:
    """Replay takes a retrying transition's attempt: a nack's is the job's own, so a
    log written before releases could wait replays to the same job."""
    job = replayed = lc.new_job(0)
    job, t1 = lc.lease(job, SETTINGS, 0, "r1")
    job, t2 = lc.nack(job, SETTINGS, "r1", 5, "boom", 50, random.Random(0))
    assert t2.attempt == job.attempt == 1 and t2.receipt is None
    for transition in (t1, t2):
        replayed = lc.replay(replayed, transition)
    assert replayed == job and replayed.error == "boom"
