"""Standard Webhooks signatures (https://www.standardwebhooks.com). Pure: no I/O.

A request carries `webhook-id`, `webhook-timestamp` (seconds) and
`webhook-signature`: space-separated `v1,<base64 HMAC-SHA256>` of
"{id}.{timestamp}." followed by the body's bytes, keyed by the secret's
decoded bytes. A secret is `whsec_` and base64. While a secret is being
rotated, the request is signed with the new one and the old one both, so a
receiver verifying with either accepts it.

A secret given (not made here) whose key is obviously weak is refused: one of n
bytes holding fewer than min(8, n // 4) distinct byte values (all zero, one
repeated letter, a short pattern over and over). Random bytes almost never do:
for the shortest key taken (16 bytes, 4 values needed) the chance is below
2^-81, and below 2^-100 for the 24 or more random bytes that `new_secret` and
other webhook services' generators make; a key of hex or base64 text (16 or 64
values) passes as well. It is a floor against mistakes, not a measure of
entropy: `new_secret()` is the way to a good one.
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
DISTINCT_BYTES_MIN = 8
"""A key needs min(DISTINCT_BYTES_MIN, its length // 4) distinct byte values."""


def new_secret() -> str:
    """A fresh random secret, `whsec_` and base64."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def key_of(secret: str) -> bytes:
    """The HMAC key a secret given to an endpoint stands for; BadRequest when it is
    not one, or when the key is obviously weak (`weakness`)."""
    key = stored_key(secret)
    weak = weakness(key)
    if weak is not None:
        raise BadRequest(
            f"this secret's key is too easy to guess: {weak}. Leave the secret out and "
            "Brook makes one, or give whsec_ and the base64 of 24 or more random bytes "
            "(openssl rand -base64 32)"
        )
    return key


def weakness(key: bytes) -> str | None:
    """Why `key` is obviously weak (too few distinct byte values for its length, as
    the module's docstring says), or None. Pure."""
    distinct = len(set(key))
    needed = min(DISTINCT_BYTES_MIN, len(key) // 4)
    if distinct >= needed:
        return None
    if distinct == 1:
        return f"its {len(key)} bytes are all {key[0]:#04x}"
    return (
        f"its {len(key)} bytes hold only {distinct} distinct values, and a key of that "
        f"length needs at least {needed}"
    )


def stored_key(secret: str) -> bytes:
    """The HMAC key a secret stands for, its strength unchecked: a stored secret,
    taken before weak keys were refused, keeps signing. BadRequest when it is no
    secret at all."""
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
