"""What an attempt's result means (SPEC §7): every status, with and without Retry-After."""

from __future__ import annotations

import email.utils
import random

from hypothesis import given
from hypothesis import strategies as st

from brook.delivery.outcome import (
    RETRY_AFTER_MS_MAX,
    Action,
    ErrorKind,
    Result,
    Verdict,
    given_up,
    judge,
    retry_after_ms,
)
from brook.queue.lifecycle import Backoff

NOW = 1_800_000_000_000
NO_JITTER = Backoff(min_ms=1000, factor=2.0, max_ms=300_000, jitter=0.0)


def verdict(result: Result, attempt: int = 1) -> tuple[Action, int]:
    found = judge(result, attempt, NO_JITTER, NOW, random.Random(1))
    return found.action, found.delay_ms


@given(st.integers(100, 599))
def test_every_status_has_its_action(status: int) -> None:
    action, delay = verdict(Result(status=status), attempt=3)
    if 200 <= status < 300:
        assert action is Action.ACK
    elif status == 410:
        assert action is Action.DISABLE
    elif status in (408, 429) or status >= 500:
        assert (action, delay) == (Action.RETRY, 4000)  # the backoff of attempt 3
    else:
        assert action is Action.DEAD


@given(st.sampled_from(list(ErrorKind)), st.integers(1, 30))
def test_no_status_is_retried_with_backoff(kind: ErrorKind, attempt: int) -> None:
    action, delay = verdict(Result(error=kind, error_message="x"), attempt)
    assert action is Action.RETRY
    assert delay == min(300_000, 1000 * 2 ** (attempt - 1))


def test_retry_after_is_honoured_as_the_larger_of_the_two_and_capped() -> None:
    assert verdict(Result(status=429, retry_after="120"))[1] == 120_000
    assert verdict(Result(status=503, retry_after="0"), attempt=2)[1] == 2000
    assert verdict(Result(status=429, retry_after="999999999"))[1] == RETRY_AFTER_MS_MAX
    date = email.utils.formatdate((NOW + 90_000) / 1000, usegmt=True)
    assert verdict(Result(status=429, retry_after=date))[1] == 90_000
    assert verdict(Result(status=429, retry_after="soon"))[1] == 1000
    reason = judge(Result(status=429, retry_after="120"), 1, NO_JITTER, NOW, random.Random(1))
    assert reason.reason == "429 (Retry-After 120)"


def test_redirects_are_dead_and_say_they_were_not_followed() -> None:
    found = judge(Result(status=301), 1, NO_JITTER, NOW, random.Random(1))
    assert found.action is Action.DEAD and "redirect (not followed)" in found.reason


@given(st.text(max_size=40))
def test_any_retry_after_text_is_read_or_ignored(text: str) -> None:
    hint = retry_after_ms(text, NOW)
    assert hint is None or 0 <= hint <= RETRY_AFTER_MS_MAX


def test_an_endpoint_is_given_up_on_once_it_failed_for_disable_after_ms() -> None:
    retry = Verdict(Action.RETRY, "503", 1000)
    hour = 3_600_000
    assert given_up(retry, 0, 5 * hour, 5 * hour - 1) == retry, "not yet"
    gave_up = given_up(retry, 0, 5 * hour, 5 * hour)
    assert gave_up.action is Action.DISABLE and "5 h (disable_after_ms)" in gave_up.reason
    assert "503" in gave_up.reason, "the last failure is named"
    dead = Verdict(Action.DEAD, "400: refused")
    assert given_up(dead, 0, hour, 2 * hour).action is Action.DISABLE
    for kept in (Verdict(Action.ACK, "200"), Verdict(Action.DISABLE, "410 Gone")):
        assert given_up(kept, 0, hour, 9 * hour) == kept
    assert given_up(retry, 0, None, 9 * hour) == retry, "None: never"
    assert given_up(retry, None, hour, 9 * hour) == retry, "not failing"
