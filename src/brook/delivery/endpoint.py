"""An endpoint: where records are delivered, and how (SPEC §7). Pure: no I/O.

`Endpoint` is what is stored (`endpoints/<name>.json`); `merge` applies the
settings a user gives to the stored ones (or to the defaults), checking each;
`public` is what the API shows (never a secret: a secret is shown once, when it
is made).
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

import msgspec

from brook import event_headers, limits, names, validate
from brook.delivery import addresses, signing
from brook.errors import BadRequest
from brook.models import Backoff
from brook.queue import settings as queue_settings
from brook.records import Record

EVENT_TYPE_PATTERN = re.compile(event_headers.EVENT_TYPE_OR_GLOB_PATTERN[1:-1])
"""An event type, or a glob pattern of them (an endpoint's `event_types`)."""
ORDERINGS = ("none", "key")
STARTS = ("latest", "earliest")
ROTATION_MS = limits.endpoint_secret_rotation_ms
RESERVED_HEADERS = ("host", "content-length", "content-type", "transfer-encoding", "connection")
"""Headers an endpoint may not set (the request's framing is the broker's), beside every
`webhook-*` and `brook-*` one."""
GROUP_PREFIX = names.ENDPOINT_GROUP_PREFIX
"""The queue groups of an endpoint are named this and its name (a reserved name)."""
LEASE_MARGIN_MS = limits.endpoint_lease_margin_ms


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    topics: tuple[str, ...]
    """Topic names or glob patterns (`orders.*`)."""
    headers: dict[str, str] = {}
    timeout_ms: int = limits.endpoint_timeout_ms_default
    max_in_flight: int = limits.endpoint_in_flight_default
    rate_limit_per_s: int | None = None
    max_attempts: int = limits.endpoint_max_attempts_default
    backoff: Backoff = Backoff()
    expire_after_ms: int | None = limits.endpoint_expire_after_ms_default
    """None: records never expire (an endpoint stored before this default keeps None)."""
    disable_after_ms: int | None = limits.endpoint_disable_after_ms_default
    """None: never disabled for failing."""
    ordering: str = "none"
    enabled: bool = True
    start: str = "latest"
    """Where a (topic, endpoint) pair starts: records appended from its creation on, or
    ("earliest") every retained record."""
    tenant: str | None = None
    """The customer the endpoint belongs to (Svix's application), if any: a key that
    names a tenant reaches only that tenant's endpoints (server/auth.py)."""
    signature: str = "v1"
    """The secrets Brook makes for it (when created or rotated without one given): v1
    (HMAC, whsec_) or v1a (Ed25519, whsk_; receivers get its whpk_ public key). A secret
    given decides by its own prefix."""
    event_types: tuple[str, ...] | None = None
    """The event types taken (names or glob patterns, `invoice.*`), matched against a
    record's `brook.event-type`; None takes every record, typed or not. A record of
    another type, or of none, is passed over: acked for this endpoint, never sent."""


class Secret(msgspec.Struct, frozen=True, array_like=True):
    value: str
    until_ms: int | None = None
    """None for the current secret; for an older one, when requests stop being signed
    with it too."""


class Endpoint(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    settings: Settings
    secrets: tuple[Secret, ...]
    """The current secret first, then those being rotated out."""
    created_ms: int
    disabled_reason: str = ""
    """Why it is disabled, when it is: by hand, the endpoint answered 410, or it failed
    for disable_after_ms."""
    failing_since_ms: int | None = None
    """When its attempts began failing, once they have failed for
    `limits.endpoint_failing_stored_after_ms` (None otherwise): so `disable_after_ms`
    counts across restarts, at two writes a failing spell at most."""

    def matches(self, topic: str) -> bool:
        """Whether records of `topic` are delivered here: a topic its patterns take
        (a dead-letter topic only by a pattern naming that namespace, names.pattern_matches),
        never the dead letters of its own deliveries nor an internal topic."""
        if topic.startswith(names.RESERVED_PREFIX) or self.own_dead_letters(topic):
            return False
        return any(names.pattern_matches(pattern, topic) for pattern in self.settings.topics)

    def takes(self, record: Record) -> bool:
        """Whether the record is of an event type the endpoint takes (`event_types`)."""
        wanted = self.settings.event_types
        if wanted is None:
            return True
        kind = event_headers.event_type(record.headers)
        return kind is not None and any(fnmatch.fnmatchcase(kind, w) for w in wanted)

    def own_dead_letters(self, topic: str) -> bool:
        """Whether `topic` looks like the dead letters of this endpoint's deliveries."""
        return topic.endswith(f".{self.name}{names.DEAD_LETTERS_SUFFIX}")

    def signing_keys(self, now_ms: int) -> list[bytes]:
        """The keys to sign with now: the current secret's, then those still rotating out."""
        return [
            signing.stored_key(s.value)
            for s in self.secrets
            if s.until_ms is None or s.until_ms > now_ms
        ]

    def group(self) -> str:
        """The name of this endpoint's queue group on each of its topics."""
        return GROUP_PREFIX + self.name

    @property
    def lease_ms(self) -> int:
        """The visibility timeout of the endpoint's queue groups."""
        return self.settings.timeout_ms + LEASE_MARGIN_MS

    def dead_letter_topic(self, topic: str) -> str:
        """Where records of `topic` that die here are copied: `<topic>.<name>.dlq`
        (names.dead_letters: always valid, a digest ending a name that would be too
        long). A record of a dead-letter topic that dies here stays in place
        (Settings.copy_dead): dead letters never beget dead letters."""
        return names.dead_letters(topic, self.name)


def message_id(record: Record) -> str:
    """The `webhook-id` of the requests delivering `record`: the sender's own event id
    when the record carries one (event_headers.EVENT_ID), else where it lies
    (`topic:partition:offset`). Stable across attempts, resends and restarts."""
    return event_headers.event_id(record.headers) or (
        f"{record.topic}:{record.partition}:{record.offset}"
    )


def subject(name: str) -> str:
    """The endpoint as its failures are shown (Supervisor.isolate)."""
    return f"endpoint {name}"


def concerns(name: str, failing: str) -> bool:
    """Whether a failing subject is endpoint `name`'s: the endpoint, or one of its
    queue groups (QueueGroup.subject ends in `/<group>`)."""
    return failing == subject(name) or failing.endswith(f"/{GROUP_PREFIX}{name}")


def group_endpoint(group: str) -> str | None:
    """The endpoint a queue group delivers to, if it is an endpoint's."""
    return group.removeprefix(GROUP_PREFIX) if group.startswith(GROUP_PREFIX) else None


_FIELDS = {f.name for f in msgspec.structs.fields(Settings)}


def merge(
    name: str,
    stored: Endpoint | None,
    given: dict[str, Any],
    now_ms: int,
    reach: addresses.Reach,
) -> tuple[Endpoint, str | None]:
    """`stored` (or a new endpoint) with the settings in `given` applied, each checked
    (BadRequest, InvalidName naming the bad one). A `secret` in `given` replaces the
    current one (which keeps signing for ROTATION_MS); a new endpoint without one gets
    a new secret. Returns the endpoint and the secret made or given, if any (shown once)."""
    validate.topic_name(name)
    unknown = set(given) - _FIELDS - {"secret"}
    if unknown:
        raise BadRequest(f"unknown endpoint settings: {', '.join(sorted(unknown))}")
    if stored is None and ("url" not in given or "topics" not in given):
        raise BadRequest("a new endpoint needs a url and topics")
    base = stored.settings if stored is not None else None
    changes: dict[str, Any] = {}
    for field, value in given.items():
        if value is None or field == "secret":
            continue
        changes[field] = _checked(field, value, reach)
    if base is None:
        settings = Settings(**changes)
    else:
        settings = msgspec.structs.replace(base, **changes) if changes else base
    if stored is not None and settings.start != stored.settings.start:
        raise BadRequest("start applies when an endpoint is created; it cannot change")
    secret = given.get("secret")
    if secret is not None:
        signing.key_of(secret)
    elif stored is None:
        secret = signing.new_secret(settings.signature)
    secrets = stored.secrets if stored is not None else ()
    if secret is not None:
        secrets = rotated(secrets, secret, now_ms)
    endpoint = Endpoint(
        name=name,
        settings=settings,
        secrets=secrets,
        created_ms=stored.created_ms if stored is not None else now_ms,
        disabled_reason=_disabled_reason(stored, settings, given),
    )
    return endpoint, secret


def _disabled_reason(stored: Endpoint | None, settings: Settings, given: dict[str, Any]) -> str:
    if settings.enabled:
        return ""
    if given.get("enabled") is False:
        return "disabled by hand"
    return stored.disabled_reason if stored is not None else "disabled by hand"


def rotated(secrets: tuple[Secret, ...], new: str, now_ms: int) -> tuple[Secret, ...]:
    """`new` as the current secret; the current one signs too for ROTATION_MS more;
    those whose time ran out are dropped, and past endpoint_secrets_retiring_max the
    oldest too (the newest retiring ones are kept)."""
    kept = [
        Secret(s.value, now_ms + ROTATION_MS if s.until_ms is None else s.until_ms)
        for s in secrets
        if s.value != new
    ]
    retiring = [s for s in kept if s.until_ms is not None and s.until_ms > now_ms]
    retiring.sort(key=lambda s: s.until_ms or 0, reverse=True)
    return (Secret(new), *retiring[: limits.endpoint_secrets_retiring_max])


def _checked(field: str, value: Any, reach: addresses.Reach) -> Any:
    if field == "url":
        return addresses.check_url(value, reach)
    if field == "topics":
        if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
            raise BadRequest("topics must be a non-empty list of topic names or glob patterns")
        if len(value) > limits.endpoint_topics_max:
            raise BadRequest(
                f"an endpoint takes at most {limits.endpoint_topics_max} topics or patterns"
            )
        for pattern in value:
            if not isinstance(pattern, str) or not names.PATTERN.fullmatch(pattern):
                raise BadRequest(
                    f"invalid topic or pattern {pattern!r}: use A-Z a-z 0-9 . _ - and * ? [ ]"
                )
            if pattern.startswith("__"):
                raise BadRequest(
                    f"invalid topic or pattern {pattern!r}: names starting with '__' are "
                    "reserved for Brook's own topics (SPEC §7)"
                )
        return tuple(dict.fromkeys(value))
    if field == "headers":
        return _headers(value)
    if field == "timeout_ms":
        return validate.whole(
            value, "timeout_ms", limits.endpoint_timeout_ms_min, limits.endpoint_timeout_ms_max
        )
    if field == "max_in_flight":
        return validate.whole(value, "max_in_flight", 1, limits.endpoint_in_flight_max)
    if field == "rate_limit_per_s":
        return validate.whole(value, "rate_limit_per_s", 1, limits.endpoint_rate_per_s_max)
    if field == "max_attempts":
        return validate.whole(value, "max_attempts", 1, limits.queue_attempts_max)
    if field == "backoff":
        return queue_settings.backoff(value)
    if field in ("expire_after_ms", "disable_after_ms"):
        return validate.whole(value, field, 0) or None  # 0: no limit
    if field == "ordering":
        if value not in ORDERINGS:
            raise BadRequest(f"ordering must be 'none' or 'key', not {value!r}")
        return value
    if field == "enabled":
        if not isinstance(value, bool):
            raise BadRequest(f"enabled must be true or false, not {value!r}")
        return value
    if field == "signature":
        if value not in signing.SCHEMES:
            raise BadRequest(f"signature must be 'v1' (HMAC) or 'v1a' (Ed25519), not {value!r}")
        return value
    if field == "event_types":
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise BadRequest("event_types must be a list of event types or glob patterns")
        if len(value) > limits.endpoint_topics_max:
            raise BadRequest(
                f"an endpoint takes at most {limits.endpoint_topics_max} event types or patterns"
            )
        for kind in value:
            if not isinstance(kind, str) or not EVENT_TYPE_PATTERN.fullmatch(kind):
                raise BadRequest(
                    f"invalid event type or pattern {kind!r}: 1 to "
                    f"{limits.event_type_chars_max} of A-Z a-z 0-9 . _ - and * ? [ ]"
                )
        return tuple(dict.fromkeys(value)) or None  # []: every record, as none given
    if field == "tenant":
        if not isinstance(value, str) or not names.USER_NAME.fullmatch(value):
            raise BadRequest(
                f"invalid tenant {value!r}: 1 to {limits.topic_name_chars_max} of "
                "A-Z a-z 0-9 . _ - (not starting with '__')"
            )
        return value
    if field == "start":
        if value not in STARTS:
            raise BadRequest(f"start must be 'latest' or 'earliest', not {value!r}")
        return value
    raise AssertionError(field)


def _headers(value: Any) -> dict[str, str]:
    most = limits.endpoint_headers_max
    if not isinstance(value, dict) or len(value) > most:
        raise BadRequest(f"headers must be an object of at most {most} names to text")
    out = {}
    for header, text in value.items():
        if not isinstance(header, str) or not names.HEADER.fullmatch(header):
            raise BadRequest(f"invalid header name {header!r}")
        lowered = header.lower()
        if lowered in RESERVED_HEADERS or lowered.startswith(("webhook-", "brook-")):
            raise BadRequest(f"the header {header} is set by the broker; choose another name")
        chars = limits.endpoint_header_chars_max
        if not isinstance(text, str) or len(text) > chars or any(c in text for c in "\r\n\0"):
            raise BadRequest(
                f"header {header}: a value is text of at most {chars:,} characters, "
                "without line breaks"
            )
        out[header] = text
    return out


def public(endpoint: Endpoint) -> dict[str, Any]:
    """The endpoint as the API shows it: its settings, never its secrets."""
    document: dict[str, Any] = msgspec.to_builtins(endpoint.settings)
    document["topics"] = list(endpoint.settings.topics)
    document["name"] = endpoint.name
    document["created_ms"] = endpoint.created_ms
    document["disabled_reason"] = endpoint.disabled_reason
    document["secrets"] = len(endpoint.secrets)
    return document


def encode(endpoint: Endpoint) -> bytes:
    return msgspec.json.encode(endpoint)


def decode(raw: bytes) -> Endpoint:
    return msgspec.json.decode(raw, type=Endpoint)
