"""Standard Webhooks signatures (https://www.standardwebhooks.com). Pure: no I/O.

A request carries `webhook-id`, `webhook-timestamp` (seconds) and
`webhook-signature`: space-separated `v1,<base64 HMAC-SHA256>` of
"{id}.{timestamp}." followed by the body's bytes, keyed by the secret's
decoded bytes. A secret is `whsec_` and base64. While a secret is being
rotated, the request is signed with the new one and the old one both, so a
receiver verifying with either accepts it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable

from brook import limits
from brook.errors import BadRequest

PREFIX = "whsec_"
SECRET_BYTES = 32
"""A new secret's key length: as long as the HMAC's output (SHA-256)."""
SECRET_BYTES_MIN = limits.endpoint_secret_bytes_min
SECRET_BYTES_MAX = limits.endpoint_secret_bytes_max


def new_secret() -> str:
    """A fresh random secret, `whsec_` and base64."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def key_of(secret: str) -> bytes:
    """The HMAC key a secret stands for; BadRequest when it is not one."""
    if not isinstance(secret, str) or not secret.startswith(PREFIX):
        raise BadRequest("a secret is whsec_ followed by base64 (or leave it out for a new one)")
    text = secret[len(PREFIX) :]
    try:
        key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("a secret is whsec_ followed by base64; this one is not base64") from None
    if not SECRET_BYTES_MIN <= len(key) <= SECRET_BYTES_MAX:
        raise BadRequest(
            f"a secret's key is {SECRET_BYTES_MIN} to {SECRET_BYTES_MAX} bytes, not {len(key)}"
        )
    return key


def sign(key: bytes, message_id: str, timestamp_s: int, body: bytes) -> str:
    """One `v1,<base64>` signature."""
    signed = f"{message_id}.{timestamp_s}.".encode() + body
    return "v1," + base64.b64encode(hmac.digest(key, signed, hashlib.sha256)).decode()


def signature_header(keys: Iterable[bytes], message_id: str, timestamp_s: int, body: bytes) -> str:
    """The `webhook-signature` value: one signature per key (the newest first)."""
    return " ".join(sign(key, message_id, timestamp_s, body) for key in keys)


def verify(key: bytes, message_id: str, timestamp_s: int, body: bytes, header: str) -> bool:
    """Whether `header` holds a v1 signature by `key` (for tests and for receivers
    written in Python; compares in constant time)."""
    expected = sign(key, message_id, timestamp_s, body)
    return any(hmac.compare_digest(expected, part) for part in header.split(" "))
