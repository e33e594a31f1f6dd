"""What an attempt sends (SPEC §7: the request): the URL to connect to and the
headers, signed. Pure: the time and the address are passed in.

An endpoint's `Target` is made once per version of its settings, so what every
attempt shares (the parsed URL, the static headers, the decoded signing keys) is
not worked out again for each record.
"""

from __future__ import annotations

import base64
import ipaddress
from urllib.parse import quote, urlsplit

from brook.delivery import signing
from brook.delivery.endpoint import Endpoint
from brook.records import Record

USER_AGENT = "brook-delivery"
DEFAULT_CONTENT_TYPE = "application/octet-stream"
_SAFE = "/%:@!$&'()*+,;=?~"
"""What stays as written in a request's path and query (RFC 3986); the rest is %-encoded."""


class Target:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        parts = urlsplit(endpoint.settings.url)
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.path = parts.path or "/"
        self.query = parts.query
        self.request_target = quote(self.path, safe=_SAFE) + (
            f"?{quote(self.query, safe=_SAFE)}" if self.query else ""
        )
        """What the request line names: the path and the query."""
        try:
            ipaddress.ip_address(self.host)
            self.literal = True
            """The host is an address: nothing to resolve, and its check never changes."""
        except ValueError:
            self.literal = False
        self.address: str | None = None
        """For a literal host: the address once checked (set by the loop)."""
        self.headers = {
            **endpoint.settings.headers,
            "host": parts.netloc.rsplit("@", 1)[-1],
            "user-agent": USER_AGENT,
        }
        """The headers every attempt sends (the endpoint's own and the fixed ones)."""
        self._keys: list[bytes] = []
        self._keys_until_ms = -1
        """The signing keys hold until this time (when a rotated-out secret retires)."""

    def signing_keys(self, now_ms: int) -> list[bytes]:
        if not 0 <= now_ms < self._keys_until_ms:
            self._keys = self.endpoint.signing_keys(now_ms)
            retiring = [s.until_ms for s in self.endpoint.secrets if s.until_ms is not None]
            self._keys_until_ms = min(
                [until for until in retiring if until > now_ms], default=2**62
            )
        return self._keys

    def headers_for(
        self, record: Record, attempt: int, message_id: str, now_ms: int
    ) -> dict[str, str]:
        """The request's headers: the endpoint's, Standard Webhooks' (signed with every
        current key) and Brook's."""
        timestamp = now_ms // 1000
        content_type = record.headers.get("content-type") if record.headers else None
        headers = self.headers.copy()
        shown = content_type.decode("latin-1") if content_type is not None else ""
        # A record's content-type with a line break in it would be a header of its own.
        usable = shown and not any(c in shown for c in "\r\n\0")
        headers["content-type"] = shown if usable else DEFAULT_CONTENT_TYPE
        headers["webhook-id"] = message_id
        headers["webhook-timestamp"] = str(timestamp)
        headers["webhook-signature"] = signing.signature_header(
            self.signing_keys(now_ms), message_id, timestamp, record.value
        )
        headers["brook-attempt"] = str(attempt)
        if record.topic:  # a test request has no record behind it
            headers["brook-topic"] = record.topic
            headers["brook-partition"] = str(record.partition)
            headers["brook-offset"] = str(record.offset)
        if record.key is not None:
            headers["brook-key"] = base64.b64encode(record.key).decode()
        return headers
