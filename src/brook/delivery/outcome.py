"""What one delivery attempt's result means for its record (SPEC §7). Pure: no I/O,
no clock (the time is passed in), randomness from the caller's generator.

    2xx                                   -> ack
    408, 429, 5xx, timeout, connection,
    TLS or protocol error, or an address
    that may not be called                -> retry after max(backoff, Retry-After),
                                             capped at RETRY_AFTER_MS_MAX (the queue
                                             group makes it dead after max_attempts)
    410 Gone                              -> disable the endpoint; the record waits
    any other 1xx, 3xx or 4xx             -> dead at once (redirects are not followed)
"""

from __future__ import annotations

import email.utils
import enum
import random

import msgspec

from brook import limits
from brook.queue.lifecycle import Backoff, retry_delay_ms

RETRY_AFTER_MS_MAX = limits.delivery_retry_after_ms_max
EXCERPT_BYTES_MAX = limits.delivery_excerpt_bytes_max


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
    what = "a redirect (not followed)" if 300 <= status < 400 else "refused"
    return Verdict(Action.DEAD, f"{status}: {what}")


def _retry(
    reason: str, result: Result, attempt: int, backoff: Backoff, now_ms: int, rng: random.Random
) -> Verdict:
    delay = retry_delay_ms(attempt, backoff, rng)
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
    hours = disable_after_ms / 3_600_000
    return Verdict(
        Action.DISABLE,
        f"no attempt succeeded for {hours:g} h (disable_after_ms), the last: {verdict.reason}",
    )
