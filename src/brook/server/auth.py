"""API keys: who may call what, on which topics.

A key is presented as `Authorization: Bearer <key>`. Its SHA-256 is compared
with every configured hash in constant time (no early exit, hmac.compare_digest),
so timing does not tell how close a guess was. Without configured keys the
server is open (and `brook serve` refuses non-loopback addresses then).
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac

from brook.config import ApiKey
from brook.errors import Forbidden, Unauthorized
from brook.names import pattern_within


class Authenticator:
    def __init__(self, keys: list[ApiKey]) -> None:
        self.keys = keys
        self._hashes = [(bytes.fromhex(k.sha256), k) for k in keys]

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def identify(self, authorization: str | None) -> ApiKey:
        """The key presented, or Unauthorized."""
        if not authorization:
            raise Unauthorized("an API key is required: Authorization: Bearer <key>")
        if not authorization.lower().startswith("bearer "):
            # Name the scheme only when it looks like one (a word): never echo a key.
            parts = authorization.split(None, 1)
            named = len(parts) == 2 and parts[0].isalpha() and len(parts[0]) <= 20
            shown = f"the {parts[0]!r} scheme" if named else "no scheme"
            raise Unauthorized(
                f"the Authorization header has {shown}; send the key as Authorization: Bearer <key>"
            )
        digest = hashlib.sha256(authorization[7:].strip().encode()).digest()
        found: ApiKey | None = None
        for stored, key in self._hashes:
            if hmac.compare_digest(stored, digest) and found is None:
                found = key
        if found is None:
            raise Unauthorized("the API key is not valid")
        return found

    def check(self, authorization: str | None, scope: str, topic: str | None) -> ApiKey:
        """The key, if it may use `scope` on `topic`; else Unauthorized or Forbidden.

        The scope "any" admits every valid key (topic patterns still apply).
        """
        key = self.identify(authorization)
        if scope != "any" and scope not in key.scopes:
            raise Forbidden(f"key {key.name!r} lacks the {scope!r} scope")
        if topic is not None and not may_use(key, topic):
            raise Forbidden(f"key {key.name!r} may not use topic {topic!r}")
        return key


def may_use(key: ApiKey, topic: str) -> bool:
    return any(fnmatch.fnmatchcase(topic, pattern) for pattern in key.topics)


def whole_broker(key: ApiKey | None) -> None:
    """Forbidden unless the key is the operator's: every topic (`*`), no tenant. What
    every tenant shares (the event-type catalog their portals show, the metrics of
    every topic and endpoint) is changed or read by such a key only, whatever its scopes."""
    if key is not None and (key.tenant is not None or "*" not in key.topics):
        raise Forbidden(
            f"key {key.name!r} is limited to some topics or a tenant: this is shared by "
            "every tenant, for a key with topics ['*'] and no tenant"
        )


def endpoint_beyond(key: ApiKey, topics: list[str], tenant: str | None) -> str | None:
    """Why an endpoint with these topic patterns and tenant lies beyond the key's
    reach, in words for a 403; None when the key may see and change it (SPEC §11).

    An endpoint sends its topics' records wherever its URL says, so a key reaches it
    only when every one of its patterns lies within the key's own (names.pattern_within),
    and, for a key that names a tenant, only when it is that tenant's. Nothing about
    another tenant's endpoint is told, not even whose it is."""
    if key.tenant is not None and tenant != key.tenant:
        return f"key {key.name!r} reaches only the endpoints of tenant {key.tenant!r}"
    for pattern in topics:
        if not pattern_within(pattern, key.topics):
            return (
                f"key {key.name!r} may not use topic pattern {pattern!r}: it lies beyond "
                f"the key's topics ({', '.join(key.topics)})"
            )
    return None


def endpoint_unreached(key: ApiKey, name: str, topics: list[str], tenant: str | None) -> str | None:
    """Why the key may not see or change the stored endpoint `name`, in words for a
    403 that tell nothing of the endpoint (its patterns, its tenant); None when it may.
    (endpoint_beyond's words are for the settings a key gives: its own.)"""
    if endpoint_beyond(key, topics, tenant) is None:
        return None
    return (
        f"key {key.name!r} does not reach endpoint {name!r} (its topics or tenant lie beyond "
        "the key's)"
    )
