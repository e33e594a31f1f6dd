"""Portal links: a tenant's name and an expiry, signed (SPEC §11, server/ui/portal.py).

Pure but for the key, which the broker keeps in its storage (`portal.key`, 32 random
bytes, made on first use): a link outlives restarts and rolling deploys, and deleting
the file revokes every link at once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from brook.names import USER_NAME

KEY_BYTES = 32


class PortalLinks:
    def __init__(self, key: bytes) -> None:
        self._key = key

    def _sign(self, text: str) -> str:
        mac = hmac.digest(self._key, f"portal:{text}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def token(self, tenant: str, expires_ms: int) -> str:
        """The last part of a link for `tenant`, good until `expires_ms`."""
        text = f"{tenant}.{expires_ms}"
        return f"{text}.{self._sign(text)}"

    def opened(self, token: str, now_ms: int) -> tuple[str, int] | None:
        """(tenant, expiry ms) of a link's token, or None: forged, altered or expired."""
        text, _, signature = token.rpartition(".")
        if not text or not hmac.compare_digest(signature, self._sign(text)):
            return None
        tenant, _, until = text.rpartition(".")
        if not until.isdigit() or int(until) <= now_ms or not USER_NAME.fullmatch(tenant):
            return None
        return tenant, int(until)
