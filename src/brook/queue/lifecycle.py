"""The life of one record in a queue group: a pure state machine. No I/O, no clock.

```
              lease                 ack
   ready ───────────────▶ leased ────────▶ acked
     ▲                    │  │  │
     │ due                │  │  └── discard, or nack / lease expiry on the last attempt,
     │                    │  │      or past expire_after_ms ─────────────────▶ dead
  retrying ◀── nack, ─────┘  │                                                  │
     ▲       release later   ├── lease expiry (attempts left): ready at once    │
     │                       └── release: ready at once                         │
     └──────────────────────────────────────── redrive (attempts from 0) ◀──────┘

   ready, retrying ── cancel (not out: never delivered again) ──────────────▶ dead
```

Attempts count deliveries: the first lease is attempt 1; a nack or an expired
lease ends an attempt; with `max_attempts=N` a record is delivered at most N
times, then it is dead. A lease given back unused (`release`: the broker's own
delivery leases ahead of sending and gives back what it did not send; a task
worker gives back a job it has no function for) is no attempt: the record is
ready again at once, or "later", after `delay_ms` (retrying meanwhile, so two
consumers that cannot handle it do not pass it back and forth in a hot loop).
A receipt names one lease; it is valid only while that lease is live. Every
function takes the time (`now_ms`) from its caller and returns a new `JobState`
and the `Transition` to append to the status log; nothing is changed in place.
"""

from __future__ import annotations

import random

import msgspec

from brook import limits
from brook.errors import BadRequest, LeaseExpired
from brook.models import Backoff, State, Transition
from brook.retry import retry_delay

FINISHED = (State.ACKED, State.DEAD)
"""The states a record does not leave by itself (a redrive or a replay brings it back)."""


class Settings(msgspec.Struct, frozen=True):
    """A queue group's settings (SPEC §1), stored with the group."""

    visibility_timeout_ms: int = limits.visibility_timeout_ms_default
    max_attempts: int = limits.queue_max_attempts_default
    backoff: Backoff = Backoff()
    expire_after_ms: int | None = None
    ordering: str = "none"
    dead_letter_topic: str | None = None
    copy_dead: bool = True
    """Whether dead records are copied to the dead-letter topic. The broker's own
    delivery groups on a dead-letter topic keep theirs in place (dead in the group,
    redrivable, still in the topic they came from): dead letters never cascade."""
    concurrency_per_key: int | None = None
    """At most this many records of one key leased at once (None: no limit; ordering
    by key is a limit of one that also keeps their order)."""
    key_rate_limit_per_s: float | None = None
    """At most this many leases a second for each key (None: no limit)."""
    rate_limit_per_s: float | None = None
    """At most this many leases a second for the whole group (None: no limit)."""
    lower_priority_share: float = 0.1
    """The share of leases that go to lower priorities while higher ones wait (fair.py)."""


class JobState(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Where one record stands. `since_ms` is when it was first seen by the group."""

    state: State
    attempt: int = 0
    receipt: str | None = None
    lease_until_ms: int = 0
    ready_at_ms: int = 0
    since_ms: int = 0
    error: str = ""
    lives: int = 0
    """How often the record was brought back to work: redriven when dead, or sent
    again by a replay once acked (a replayed record starts its count at 1)."""

    @property
    def untouched(self) -> bool:
        """Ready and never leased or redriven: all there is to it is in the topic."""
        return self.state is State.READY and self.attempt == 0 and self.lives == 0


def new_job(now_ms: int) -> JobState:
    return JobState(State.READY, 0, None, 0, now_ms, now_ms)


def replayed(now_ms: int) -> JobState:
    """An acked record put back to work by a replay at `now_ms`: a new life, as a
    redrive gives one (attempts from 0, its age for expire_after_ms from now)."""
    return JobState(State.READY, 0, None, 0, now_ms, now_ms, lives=1)


def is_available(job: JobState, now_ms: int) -> bool:
    """May be leased now: ready, due for a retry, or leased past its visibility timeout."""
    if job.state is State.READY:
        return True
    if job.state is State.RETRYING:
        return now_ms >= job.ready_at_ms
    return job.state is State.LEASED and now_ms >= job.lease_until_ms


def expire(job: JobState, settings: Settings, now_ms: int) -> tuple[JobState, Transition] | None:
    """The transition time alone causes, if any: an expired lease ends its attempt
    (ready again at once, or dead after the last), a due retry becomes ready, and a
    record past `expire_after_ms` is dead."""
    if job.state in (State.ACKED, State.DEAD):
        return None
    if settings.expire_after_ms is not None and now_ms - job.since_ms >= settings.expire_after_ms:
        return _dead(job, now_ms, "expired: older than expire_after_ms")
    if job.state is State.LEASED and now_ms >= job.lease_until_ms:
        if job.attempt >= settings.max_attempts:
            return _dead(job, now_ms, f"lease expired on the last attempt ({job.attempt})")
        ready = msgspec.structs.replace(job, state=State.READY, receipt=None, ready_at_ms=now_ms)
        return ready, Transition(now_ms, State.READY, job.attempt, "lease expired")
    if job.state is State.RETRYING and now_ms >= job.ready_at_ms:
        ready = msgspec.structs.replace(job, state=State.READY, ready_at_ms=now_ms)
        return ready, Transition(now_ms, State.READY, job.attempt, "retry due")
    return None


def lease(
    job: JobState, settings: Settings, now_ms: int, receipt: str, visibility_ms: int | None = None
) -> tuple[JobState, Transition]:
    """Deliver the record: its next attempt starts. The caller checks availability first."""
    assert job.state is State.READY, f"leasing a {job.state.value} record"
    until = now_ms + (settings.visibility_timeout_ms if visibility_ms is None else visibility_ms)
    attempt = job.attempt + 1
    leased = msgspec.structs.replace(
        job, state=State.LEASED, attempt=attempt, receipt=receipt, lease_until_ms=until
    )
    return leased, Transition(now_ms, State.LEASED, attempt, "", receipt, until)


def _live(job: JobState, receipt: str, now_ms: int) -> None:
    if job.state is not State.LEASED or job.receipt != receipt or now_ms >= job.lease_until_ms:
        raise LeaseExpired(
            "this receipt's lease is no longer live (it expired, or the record was acked, "
            "nacked or leased again)"
        )


def ack(job: JobState, receipt: str, now_ms: int) -> tuple[JobState, Transition]:
    _live(job, receipt, now_ms)
    acked = msgspec.structs.replace(job, state=State.ACKED, receipt=None)
    return acked, Transition(now_ms, State.ACKED, job.attempt)


def nack(
    job: JobState,
    settings: Settings,
    receipt: str,
    now_ms: int,
    reason: str,
    delay_ms: int | None,
    rng: random.Random,
) -> tuple[JobState, Transition]:
    """The attempt failed: retry after `delay_ms` (or the backoff), or dead after the last."""
    _live(job, receipt, now_ms)
    if delay_ms is not None and delay_ms < 0:
        raise BadRequest(f"delay_ms must be at least 0, not {delay_ms}")
    if job.attempt >= settings.max_attempts:
        return _dead(job, now_ms, reason or f"failed on the last attempt ({job.attempt})")
    delay = retry_delay(settings.backoff, job.attempt, rng) if delay_ms is None else delay_ms
    due = now_ms + delay
    retrying = msgspec.structs.replace(
        job, state=State.RETRYING, receipt=None, ready_at_ms=due, error=reason
    )
    return retrying, Transition(now_ms, State.RETRYING, job.attempt, reason, None, due)


def extend(job: JobState, receipt: str, now_ms: int, ms: int) -> tuple[JobState, Transition]:
    """Keep the lease for `ms` more from now."""
    _live(job, receipt, now_ms)
    if ms <= 0:
        raise BadRequest(f"extend needs a positive number of ms, not {ms}")
    until = now_ms + ms
    extended = msgspec.structs.replace(job, lease_until_ms=until)
    return extended, Transition(now_ms, State.LEASED, job.attempt, "extended", receipt, until)


def discard(job: JobState, receipt: str, now_ms: int, reason: str) -> tuple[JobState, Transition]:
    _live(job, receipt, now_ms)
    return _dead(job, now_ms, reason or "discarded")


def cancel(job: JobState, now_ms: int, reason: str) -> tuple[JobState, Transition]:
    """A record not out (ready, delayed, or waiting to retry) made dead at once: it is
    never delivered again unless redriven (a task's `app.revoke`)."""
    assert job.state in (State.READY, State.RETRYING), f"cancelling a {job.state.value} record"
    return _dead(job, now_ms, reason or "cancelled")


def release(
    job: JobState,
    receipt: str,
    now_ms: int,
    reason: str = "released unsent",
    delay_ms: int | None = None,
) -> tuple[JobState, Transition]:
    """Give the lease back with its attempt not spent (the record was never sent, its
    attempt ended with no outcome, the broker having stopped, or its consumer cannot
    handle it): ready again at once, or with `delay_ms` > 0 retrying until then. The
    record's last error stays as it was (this is no failure). The transition names
    the receipt it ends, which is how `replay` tells it from a redrive or a nack.
    Raises LeaseExpired, and BadRequest for a negative delay."""
    _live(job, receipt, now_ms)
    if delay_ms is not None and delay_ms < 0:
        raise BadRequest(f"delay_ms must be at least 0, not {delay_ms}")
    attempt = job.attempt - 1
    if delay_ms:
        due = now_ms + delay_ms
        later = msgspec.structs.replace(
            job, state=State.RETRYING, attempt=attempt, receipt=None, ready_at_ms=due
        )
        return later, Transition(now_ms, State.RETRYING, attempt, reason, receipt, due)
    ready = msgspec.structs.replace(
        job, state=State.READY, attempt=attempt, receipt=None, ready_at_ms=now_ms
    )
    return ready, Transition(now_ms, State.READY, attempt, reason, receipt)


def redrive(job: JobState, now_ms: int) -> tuple[JobState, Transition]:
    """Put a dead record back to work, its attempts counted afresh."""
    assert job.state is State.DEAD, f"redriving a {job.state.value} record"
    ready = JobState(State.READY, since_ms=now_ms, ready_at_ms=now_ms, lives=job.lives + 1)
    return ready, Transition(now_ms, State.READY, 0, "redriven")


def replay(job: JobState, transition: Transition) -> JobState:
    """The job after `transition`, as the status log tells it: rebuilding state on
    start folds a record's transitions over `new_job(its timestamp)`, and arrives at
    exactly the job the live calls made."""
    at, state = transition.at_ms, transition.state
    if state is State.LEASED:
        return msgspec.structs.replace(
            job,
            state=state,
            attempt=transition.attempt,
            receipt=transition.receipt,
            lease_until_ms=transition.until_ms,
        )
    if state is State.READY:
        if transition.receipt is not None:  # a lease given back unused
            return msgspec.structs.replace(
                job, state=state, attempt=transition.attempt, receipt=None, ready_at_ms=at
            )
        if transition.attempt == 0 and job.state is not State.RETRYING:  # redriven: a new life
            return JobState(State.READY, since_ms=at, ready_at_ms=at, lives=job.lives + 1)
        return msgspec.structs.replace(job, state=state, receipt=None, ready_at_ms=at)
    if state is State.RETRYING:
        # A nack keeps the attempt and says why it failed; a lease given back for
        # later (it names its receipt) takes its attempt back and leaves the error.
        error = job.error if transition.receipt is not None else transition.reason
        return msgspec.structs.replace(
            job,
            state=state,
            attempt=transition.attempt,
            receipt=None,
            ready_at_ms=transition.until_ms,
            error=error,
        )
    if state is State.ACKED:
        return msgspec.structs.replace(job, state=state, receipt=None)
    return msgspec.structs.replace(job, state=state, receipt=None, error=transition.reason)


def _dead(job: JobState, now_ms: int, reason: str) -> tuple[JobState, Transition]:
    dead = msgspec.structs.replace(job, state=State.DEAD, receipt=None, error=reason)
    return dead, Transition(now_ms, State.DEAD, job.attempt, reason)
