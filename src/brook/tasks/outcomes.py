"""How a run ends, as the call that settles its job: pure, shared by the worker and
the testing mode (`app.testing()`), so both treat a return, an exception, `Retry`
and `Discard` the same, and call the same outcome hook."""

from __future__ import annotations

from typing import Any

from brook.tasks import payload
from brook.tasks.ledger import Outcome
from brook.tasks.refs import Discard, Retry

ACKED = Outcome("ack")


def of_return(value: Any) -> tuple[Outcome, str]:
    """The outcome of a run that returned `value`, and why its result is not kept
    ("" when it is, or there is none)."""
    if value is None:  # nothing to keep: app.job tells None for it all the same
        return ACKED, ""
    result, why_not = payload.encode_result(value)
    return Outcome("ack", result=result), why_not


def of_error(error: BaseException) -> Outcome:
    """The outcome of a run that raised `error`."""
    if isinstance(error, Retry):
        return Outcome("nack", reason=error.reason or "Retry", delay_ms=error.delay_ms)
    if isinstance(error, Discard):
        return Outcome("discard", reason=error.reason or "Discard")
    return Outcome("nack", reason=payload.error_summary(error))


def hook_point(outcome: Outcome, attempt: int, max_attempts: int) -> str | None:
    """Which outcome hook (tasks/hooks.py) a settled job calls: on_success for an
    ack, on_failure for a discard or a failed last attempt, on_retry for another
    failed one; None for a release (it did not run)."""
    if outcome.action == "ack":
        return "on_success"
    if outcome.action == "discard":
        return "on_failure"
    if outcome.action == "nack":
        return "on_failure" if attempt >= max_attempts else "on_retry"
    return None
