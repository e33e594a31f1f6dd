"""The dashboard's cookies, signed: who is logged in, and the CSRF token. Pure: the
time is passed in.

A session cookie is `<key name>.<expiry ms>.<signature>`: it names the API key
the operator logged in with (never the key itself) and is signed with a secret
made when the server starts (so a restart logs everyone out; nothing to store or
leak). The CSRF token of a form is a signature of the browser's `brook_csrf`
cookie, which is random, HttpOnly and SameSite=Strict: a page on another site
can make a browser post to the dashboard but can neither send that cookie along
(SameSite) nor know the token to put in the form.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from brook import limits

SESSION_COOKIE = "brook_session"
CSRF_COOKIE = "brook_csrf"
SESSION_MS = limits.dashboard_session_ms


class Signer:
    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def _sign(self, purpose: str, text: str) -> str:
        mac = hmac.digest(self._secret, f"{purpose}:{text}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def session(self, key_name: str, now_ms: int, until_ms: int | None = None) -> str:
        """A session cookie's value for a login with the key named `key_name`, good for
        SESSION_MS (or until `until_ms`, a portal link's end, if sooner)."""
        until = now_ms + SESSION_MS if until_ms is None else min(until_ms, now_ms + SESSION_MS)
        text = f"{key_name}.{until}"
        return f"{text}.{self._sign('session', text)}"

    def session_key(self, value: str | None, now_ms: int) -> str | None:
        """The key name a session cookie stands for, or None (absent, forged, expired)."""
        if not value or value.count(".") < 2:
            return None
        text, _, signature = value.rpartition(".")
        if not hmac.compare_digest(signature, self._sign("session", text)):
            return None
        name, _, until = text.rpartition(".")
        if not until.isdigit() or int(until) <= now_ms:
            return None
        return name

    @staticmethod
    def new_csrf_cookie() -> str:
        return secrets.token_urlsafe(24)

    def csrf_token(self, cookie: str) -> str:
        """The token forms carry for the browser holding `cookie`."""
        return self._sign("csrf", cookie)

    def csrf_ok(self, cookie: str | None, token: str | None) -> bool:
        return bool(cookie and token) and hmac.compare_digest(
            str(token), self.csrf_token(str(cookie))
        )


def cookies(header: str | None) -> dict[str, str]:
    """A Cookie header's values by name (the first of a repeated name)."""
    found: dict[str, str] = {}
    for part in (header or "").split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name and name not in found:
            found[name] = value.strip().strip('"')
    return found


def set_cookie(name: str, value: str, max_age_s: int | None = None, secure: bool = False) -> str:
    """A Set-Cookie value: HttpOnly, SameSite=Strict, for the dashboard's paths only."""
    parts = [f"{name}={value}", "Path=/ui", "HttpOnly", "SameSite=Strict"]
    if max_age_s is not None:
        parts.append(f"Max-Age={max_age_s}")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)
