"""What the sync and async clients share about talking HTTP: the request to send,
how to read the answer, and whether a failed call may be sent again."""

from __future__ import annotations

import re
from typing import Any

import httpx

from brook import limits
from brook.client import protocol
from brook.client.protocol import Call
from brook.errors import Overloaded, Unauthorized, Unavailable
from brook.retry import doubling, retry_delay

_RESEND = doubling(limits.client_resend_ms_min, limits.client_resend_ms_max)
_NOTHING_ANSWERED = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)


_KEY = re.compile(r"[\x21-\x7e]+")
"""What an API key can be: visible ASCII (what an HTTP header carries as it is)."""


def headers_for(api_key: str | None) -> dict[str, str]:
    """The headers that carry `api_key`. Unauthorized for what cannot be a key (not
    text, or characters an HTTP header cannot carry): said at once, not as an error of
    the HTTP library on the first call."""
    if not api_key:
        return {}
    if not isinstance(api_key, str) or not _KEY.fullmatch(api_key):
        # (never shown: it may be a real key with a stray character)
        raise Unauthorized(
            "the API key given is not one: a key is printable ASCII with no spaces or line "
            "breaks (`brook keys create` makes one)"
        )
    return {"authorization": f"Bearer {api_key}"}


def request_args(call: Call) -> dict[str, Any]:
    return {
        "method": call.method,
        "url": call.path,
        "params": call.params,
        "content": call.body,
        "headers": call.headers,
    }


def resend_after(url: str, call: Call, attempt: int, exc: httpx.HTTPError) -> float:
    """Seconds to wait before sending `call` again after attempt number `attempt` failed
    with `exc`; raises Unavailable when it must not, or need not, be sent again."""
    if isinstance(exc, _NOTHING_ANSWERED):
        if call.retry_safe and attempt <= limits.client_resends_max:
            return retry_delay(_RESEND, attempt) / 1000
        raise Unavailable(f"cannot reach {url}: {exc}") from None
    if isinstance(exc, httpx.TimeoutException):
        raise Unavailable(f"{url} did not answer in time: {exc}") from None
    raise Unavailable(f"talking to {url} failed: {exc}") from None


def overloaded_wait(response: httpx.Response, attempt: int) -> float | None:
    """Seconds to wait before sending again a call the server refused with 503
    overloaded (back-pressure: nothing of it was kept, so any call may be resent);
    None when it was not refused so, or after client_overloaded_resends_max tries."""
    if response.status_code != 503 or attempt > limits.client_overloaded_resends_max:
        return None
    if not isinstance(protocol.error_from(503, response.content), Overloaded):
        return None
    try:
        hint = float(response.headers.get("retry-after", "1"))
    except ValueError:
        hint = 1.0
    return min(max(hint, limits.client_retry_after_s_min), limits.client_retry_after_s_max)


def answer(call: Call, response: httpx.Response) -> Any:
    """The call's result, or the error the server reported (as its BrookError)."""
    if response.status_code >= 400:
        raise protocol.error_from(response.status_code, response.content)
    return call.parse(response.status_code, dict(response.headers), response.content)
