"""What one delivery attempt's result means for its record (SPEC §7). Pure: no I/O,
no clock (the time is passed in), randomness from the caller's generator.

    2xx                                   -> ack
    408, 429, 5xx, timeout, connection,
    TLS or protocol error, or an address
    that may not be called                -> retry after max(backoff, Retry-After),
                                             capped at RETRY_AFTER_MS_MAX (the queue
                                             group makes it dead after max_attempts)
    3xx                                   -> retry, as above: redirects are not
                                             followed, and the reason says where it
                                             pointed (a moved endpoint is fixed by
                                             pointing it at the new address, then its
                                             records go on rather than being dead)
    410 Gone                              -> disable the endpoint; the record waits
    any other 1xx or 4xx                  -> dead at once

`final` then makes DEAD of a retry that leaves its record nothing more (its last
attempt, or a next one past `expire_after_ms`), so the attempt that kills a record
is counted as dead, with why.
"""

from __future__ import annotations

import contextlib
import email.utils
import enum
import http
import random
from urllib.parse import urljoin

import msgspec

from brook import limits
from brook.durations import words
from brook.models import Backoff
from brook.queue.lifecycle import Settings
from brook.retry import retry_delay

RETRY_AFTER_MS_MAX = limits.delivery_retry_after_ms_max
EXCERPT_BYTES_MAX = limits.delivery_excerpt_bytes_max
LOCATION_CHARS_MAX = limits.delivery_location_chars_max


class ErrorKind(enum.Enum):
    """Why an attempt got no HTTP status."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    TLS = "tls"
    PROTOCOL = "protocol"
    """The endpoint answered something that is not HTTP."""
    ADDRESS = "address"
    """The endpoint's name resolved to an address that may not be called (SSRF)."""
    DNS = "dns"


class Result(msgspec.Struct, frozen=True):
    """What an attempt brought back."""

    status: int | None = None
    """The HTTP status, or None when there was none (see `error`)."""
    error: ErrorKind | None = None
    error_message: str = ""
    latency_ms: float = 0.0
    retry_after: str | None = None
    """The Retry-After header as sent (seconds, or an HTTP date)."""
    excerpt: bytes = b""
    """The first EXCERPT_BYTES_MAX bytes of the response body."""
    location: str | None = None
    """A redirect's Location, as `location_shown` makes it (absolute, printable, cut)."""


class Action(enum.Enum):
    ACK = "ack"
    RETRY = "retry"
    DEAD = "dead"
    DISABLE = "disable"


class Verdict(msgspec.Struct, frozen=True):
    action: Action
    reason: str
    """For the status log and the dead-letter record: what happened, for people."""
    delay_ms: int = 0
    """For RETRY: how long the record waits."""


def judge(
    result: Result, attempt: int, backoff: Backoff, now_ms: int, rng: random.Random
) -> Verdict:
    """The verdict on attempt `attempt` (1-based) of a record."""
    status = result.status
    if status is None:
        kind = result.error.value if result.error is not None else "error"
        reason = f"{kind}: {result.error_message}" if result.error_message else kind
        return _retry(reason, result, attempt, backoff, now_ms, rng)
    if 200 <= status < 300:
        return Verdict(Action.ACK, f"{status}")
    if status == 410:
        return Verdict(Action.DISABLE, "410 Gone: the endpoint asked to be disabled")
    if status in (408, 429) or status >= 500:
        return _retry(f"{status}", result, attempt, backoff, now_ms, rng)
    if 300 <= status < 400:
        return _retry(_redirected(status, result.location), result, attempt, backoff, now_ms, rng)
    return Verdict(Action.DEAD, f"{status}: refused")


def _redirected(status: int, location: str | None) -> str:
    """What a redirect means for people: where it pointed, and what to do."""
    try:
        answered = f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        answered = f"{status}"
    if not location:
        return (
            f"the endpoint answered {answered} with no Location; Brook does not follow "
            "redirects: point the endpoint at the address that takes the requests"
        )
    return (
        f"the endpoint answered {answered} to {location}; Brook does not follow "
        "redirects: point the endpoint at the new address"
    )


def location_shown(location: str, url: str) -> str:
    """A redirect's Location for a reason: made absolute against the endpoint's `url`,
    every character that is not printable replaced by `?`, cut at LOCATION_CHARS_MAX.
    (The receiver's header, not a secret: the endpoint's url is the operator's own.)"""
    text = location.strip()
    with contextlib.suppress(ValueError):  # one no URL parser takes: shown as it came
        text = urljoin(url, text)
    text = "".join(c if c.isprintable() else "?" for c in text[: LOCATION_CHARS_MAX + 1])
    return text if len(text) <= LOCATION_CHARS_MAX else text[: LOCATION_CHARS_MAX - 1] + "…"


def _retry(
    reason: str, result: Result, attempt: int, backoff: Backoff, now_ms: int, rng: random.Random
) -> Verdict:
    delay = retry_delay(backoff, attempt, rng)
    hint = retry_after_ms(result.retry_after, now_ms)
    if hint is not None:
        delay = max(delay, hint)
        reason += f" (Retry-After {result.retry_after})"
    return Verdict(Action.RETRY, reason, min(delay, RETRY_AFTER_MS_MAX))


def retry_after_ms(value: str | None, now_ms: int) -> int | None:
    """A Retry-After header (delay-seconds or an HTTP date) as ms from now, capped at
    RETRY_AFTER_MS_MAX; None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return min(int(text[:12]) * 1000, RETRY_AFTER_MS_MAX)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0, min(int(when.timestamp() * 1000) - now_ms, RETRY_AFTER_MS_MAX))


def given_up(
    verdict: Verdict, failing_since_ms: int | None, disable_after_ms: int | None, now_ms: int
) -> Verdict:
    """The verdict on a failed attempt, or DISABLE once no attempt has succeeded for
    `disable_after_ms` since `failing_since_ms` (the first failure after a success): an
    endpoint failing for days is given up on, rather than a backlog growing behind it.
    The record waits, as with a 410."""
    if verdict.action in (Action.ACK, Action.DISABLE) or not disable_after_ms:
        return verdict
    if failing_since_ms is None or now_ms - failing_since_ms < disable_after_ms:
        return verdict
    return Verdict(
        Action.DISABLE,
        f"no attempt succeeded for {words(disable_after_ms)} (disable_after_ms), "
        f"the last: {verdict.reason}",
    )


def final(
    verdict: Verdict, attempt: int, settings: Settings, since_ms: int | None, now_ms: int
) -> Verdict:
    """The verdict on failed attempt `attempt` of a record first seen at `since_ms`
    (by its queue group, whose `settings` rule it): DEAD, with why, when a RETRY would
    leave it nothing more: that was its last attempt (`max_attempts`), or its next one
    would come due when it is past `expire_after_ms` (it would expire unsent). Else
    the verdict as it is. The queue group would make it dead either way; saying so
    here counts the attempt that killed it as dead, not as a retry."""
    if verdict.action is not Action.RETRY:
        return verdict
    if attempt >= settings.max_attempts:
        return Verdict(
            Action.DEAD,
            f"{verdict.reason}; attempt {attempt} was the last (max_attempts "
            f"{settings.max_attempts})",
        )
    expire = settings.expire_after_ms
    if (
        expire is not None
        and since_ms is not None
        and now_ms + verdict.delay_ms >= since_ms + expire
    ):
        return Verdict(
            Action.DEAD,
            f"{verdict.reason}; no attempt left: the record is older than expire_after_ms "
            f"({words(expire)}) before its next one would be due",
        )
    return verdict
