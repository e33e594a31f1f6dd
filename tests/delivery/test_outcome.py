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
    final,
    given_up,
    judge,
    location_shown,
    retry_after_ms,
)
from brook.models import Backoff
from brook.queue.lifecycle import Settings

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
    elif status in (408, 429) or status >= 500 or 300 <= status < 400:
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


def test_redirects_are_retried_and_say_where_they_pointed_and_what_to_do() -> None:
    moved = Result(status=301, location="https://new.example.com/hook")
    found = judge(moved, 1, NO_JITTER, NOW, random.Random(1))
    assert (found.action, found.delay_ms) == (Action.RETRY, 1000)
    assert found.reason == (
        "the endpoint answered 301 Moved Permanently to https://new.example.com/hook; "
        "Brook does not follow redirects: point the endpoint at the new address"
    )
    bare = judge(Result(status=399), 1, NO_JITTER, NOW, random.Random(1))
    assert bare.action is Action.RETRY
    assert "answered 399 with no Location; Brook does not follow redirects" in bare.reason


def test_a_location_is_shown_absolute_printable_and_cut() -> None:
    url = "https://hooks.example.com/brook/in"
    assert location_shown("/v2/in", url) == "https://hooks.example.com/v2/in"
    assert location_shown("https://x.example/\x00\x1b[31m", url) == "https://x.example/??[31m"
    long = location_shown("https://x.example/" + "a" * 1000, url)
    assert len(long) == 200 and long.endswith("…")
    assert location_shown("http://[::1", url) == "http://[::1", "unparsable: as it came"


@given(st.text(max_size=40))
def test_any_retry_after_text_is_read_or_ignored(text: str) -> None:
    hint = retry_after_ms(text, NOW)
    assert hint is None or 0 <= hint <= RETRY_AFTER_MS_MAX


def test_an_endpoint_is_given_up_on_once_it_failed_for_disable_after_ms() -> None:
    retry = Verdict(Action.RETRY, "503", 1000)
    hour = 3_600_000
    assert given_up(retry, 0, 5 * hour, 5 * hour - 1) == retry, "not yet"
    gave_up = given_up(retry, 0, 5 * hour, 5 * hour)
    assert gave_up.action is Action.DISABLE
    assert gave_up.reason.startswith("no attempt succeeded for 5 h (disable_after_ms)")
    seconds = given_up(retry, 0, 10_000, 10_000)
    assert "no attempt succeeded for 10 s (disable_after_ms)" in seconds.reason, seconds.reason
    assert "503" in gave_up.reason, "the last failure is named"
    dead = Verdict(Action.DEAD, "400: refused")
    assert given_up(dead, 0, hour, 2 * hour).action is Action.DISABLE
    for kept in (Verdict(Action.ACK, "200"), Verdict(Action.DISABLE, "410 Gone")):
        assert given_up(kept, 0, hour, 9 * hour) == kept
    assert given_up(retry, 0, None, 9 * hour) == retry, "None: never"
    assert given_up(retry, None, hour, 9 * hour) == retry, "not failing"


SETTINGS = Settings(max_attempts=3, expire_after_ms=60_000)


def test_a_retry_that_leaves_nothing_more_is_dead_and_says_why() -> None:
    """The attempt that kills a record is counted as dead (final): the last one, or one
    whose next attempt would come due past expire_after_ms."""
    retry = Verdict(Action.RETRY, "503", 1000)
    assert final(retry, 2, SETTINGS, NOW, NOW) == retry, "attempts and time left"
    last = final(retry, 3, SETTINGS, NOW, NOW)
    assert last.action is Action.DEAD
    assert last.reason == "503; attempt 3 was the last (max_attempts 3)"
    late = final(retry, 1, SETTINGS, NOW - 59_000, NOW)
    assert late.action is Action.DEAD
    assert "503; no attempt left" in late.reason and "(1 min)" in late.reason, late.reason
    assert final(retry, 1, SETTINGS, NOW - 58_999, NOW) == retry, "due just before expiry"
    assert final(retry, 1, Settings(max_attempts=3), 0, NOW) == retry, "no expiry"
    assert final(retry, 1, SETTINGS, None, NOW) == retry, "not known: the group decides"
    for kept in (
        Verdict(Action.ACK, "200"),
        Verdict(Action.DEAD, "400"),
        Verdict(Action.DISABLE, "410"),
    ):
        assert final(kept, 3, SETTINGS, 0, NOW) == kept
