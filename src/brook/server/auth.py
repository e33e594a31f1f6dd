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
