"""Standard Webhooks signatures (https://www.standardwebhooks.com). Pure: no I/O.

A request carries `webhook-id`, `webhook-timestamp` (seconds) and
`webhook-signature`: space-separated `v1,<base64 HMAC-SHA256>` of
"{id}.{timestamp}." followed by the body's bytes, keyed by the secret's
decoded bytes. A secret is `whsec_` and base64. While a secret is being
rotated, the request is signed with the new one and the old one both, so a
receiver verifying with either accepts it.

Or, asymmetric (the spec's `v1a`): the endpoint's secret is an Ed25519 private key,
`whsk_` and the base64 of its 32-byte seed (or of the 64 bytes seed and public key, as
libsodium keeps it), and each signature is `v1a,<base64 Ed25519 signature>` of the same
bytes. Receivers are given only the public key, `whpk_` and the base64 of its 32 bytes:
a receiver's leaked key lets nobody forge a request. A stored key travels as bytes like
an HMAC key (to the worker processes too), tagged `ED25519_TAG` + seed.

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
import functools
import hashlib
import hmac
import secrets
from collections.abc import Iterable

from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from brook import limits
from brook.errors import BadRequest

PREFIX = "whsec_"
SIGNING_PREFIX = "whsk_"
"""An Ed25519 private key (v1a)."""
PUBLIC_PREFIX = "whpk_"
"""Its public key, for receivers."""
ED25519_TAG = b"\x00brook-ed25519\x00"
"""Begins a stored key that signs with Ed25519 (its seed follows); no HMAC key given as
whsec_ may begin so (refused), so the two never mix."""
ED25519_SEED_BYTES = 32
SCHEMES = ("v1", "v1a")
SECRET_BYTES_MIN = limits.endpoint_secret_bytes_min
SECRET_BYTES_MAX = limits.endpoint_secret_bytes_max


def new_secret(scheme: str = "v1") -> str:
    """A fresh random secret: `whsec_` and base64 (v1), or an Ed25519 key, `whsk_` and the
    base64 of its seed (v1a)."""
    if scheme == "v1a":
        return SIGNING_PREFIX + base64.b64encode(secrets.token_bytes(ED25519_SEED_BYTES)).decode()
    return (
        PREFIX + base64.b64encode(secrets.token_bytes(limits.endpoint_secret_bytes_made)).decode()
    )


def public_key(secret: str) -> str | None:
    """The `whpk_` public key of a `whsk_` secret (receivers verify with it); None for
    an HMAC secret (whsec_), which has none."""
    key = stored_key(secret)
    if not key.startswith(ED25519_TAG):
        return None
    raw = (
        _private(key[len(ED25519_TAG) :]).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    )
    return PUBLIC_PREFIX + base64.b64encode(raw).decode()


def key_of(secret: str) -> bytes:
    """The key a secret given to an endpoint stands for (stored_key); BadRequest when
    it is not one, or when the key is obviously weak (`weakness`)."""
    key = stored_key(secret)
    weak = weakness(key.removeprefix(ED25519_TAG))
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
    needed = min(limits.endpoint_secret_distinct_bytes_min, len(key) // 4)
    if distinct >= needed:
        return None
    if distinct == 1:
        return f"its {len(key)} bytes are all {key[0]:#04x}"
    return (
        f"its {len(key)} bytes hold only {distinct} distinct values, and a key of that "
        f"length needs at least {needed}"
    )


def stored_key(secret: str) -> bytes:
    """The key a secret stands for (an HMAC key, or ED25519_TAG and a seed), its strength
    unchecked: a stored secret, taken before weak keys were refused, keeps signing.
    BadRequest when it is no secret at all."""
    if isinstance(secret, str) and secret.startswith(SIGNING_PREFIX):
        raw = _base64(secret[len(SIGNING_PREFIX) :], "whsk_")
        if len(raw) == 2 * ED25519_SEED_BYTES:  # libsodium's form: the seed, then its public key
            seed, public = raw[:ED25519_SEED_BYTES], raw[ED25519_SEED_BYTES:]
            if _private(seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw) != public:
                raise BadRequest("this whsk_ key's second half is not its seed's public key")
            raw = seed
        if len(raw) != ED25519_SEED_BYTES:
            raise BadRequest(
                f"an Ed25519 secret is whsk_ and the base64 of its 32-byte seed (or of the 64 "
                f"bytes seed and public key), not of {len(raw)} bytes"
            )
        return ED25519_TAG + raw
    if not isinstance(secret, str) or not secret.startswith(PREFIX):
        raise BadRequest(
            "a secret is whsec_ followed by base64, or an Ed25519 key whsk_ followed by "
            "base64 (or leave it out for a new one)"
        )
    key = _base64(secret[len(PREFIX) :], "whsec_")
    if not SECRET_BYTES_MIN <= len(key) <= SECRET_BYTES_MAX:
        raise BadRequest(
            f"a secret's key is {SECRET_BYTES_MIN} to {SECRET_BYTES_MAX} bytes, not {len(key)}"
        )
    if key.startswith(ED25519_TAG):
        raise BadRequest("this secret's key is not one Brook can tell from an Ed25519 key")
    return key


def _base64(text: str, prefix: str) -> bytes:
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(
            f"a secret is {prefix} followed by base64; this one is not base64"
        ) from None


@functools.lru_cache(maxsize=1024)
def _private(seed: bytes) -> Ed25519PrivateKey:
    """The private key of a seed (kept: an endpoint signs every request with it)."""
    return Ed25519PrivateKey.from_private_bytes(seed)


def sign(key: bytes, message_id: str, timestamp_s: int, body: bytes) -> str:
    """One signature: `v1,<base64 HMAC>`, or `v1a,<base64 Ed25519>` for an Ed25519 key."""
    signed = f"{message_id}.{timestamp_s}.".encode() + body
    if key.startswith(ED25519_TAG):
        signature = _private(key[len(ED25519_TAG) :]).sign(signed)
        return "v1a," + base64.b64encode(signature).decode()
    return "v1," + base64.b64encode(hmac.digest(key, signed, hashlib.sha256)).decode()


def signature_header(keys: Iterable[bytes], message_id: str, timestamp_s: int, body: bytes) -> str:
    """The `webhook-signature` value: one signature per key (the newest first)."""
    return " ".join(sign(key, message_id, timestamp_s, body) for key in keys)


def verify(key: bytes, message_id: str, timestamp_s: int, body: bytes, header: str) -> bool:
    """Whether `header` holds a v1 signature by `key` (for tests and for receivers
    written in Python; compares in constant time)."""
    expected = sign(key, message_id, timestamp_s, body)
    return any(hmac.compare_digest(expected, part) for part in header.split(" "))


def verify_v1a(public: str, message_id: str, timestamp_s: int, body: bytes, header: str) -> bool:
    """Whether `header` holds a v1a signature by the key whose public key is `public`
    (whpk_): what a receiver in Python does with the `cryptography` package."""
    key = Ed25519PublicKey.from_public_bytes(_base64(public.removeprefix(PUBLIC_PREFIX), "whpk_"))
    signed = f"{message_id}.{timestamp_s}.".encode() + body
    for part in header.split(" "):
        scheme, _, value = part.partition(",")
        if scheme == "v1a":
            try:
                key.verify(base64.b64decode(value), signed)
                return True
            except Exception:  # InvalidSignature, or not base64: not this one
                continue
    return False
