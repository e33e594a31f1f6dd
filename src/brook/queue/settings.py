"""A queue group's settings: checked, merged with the stored ones, stored.

Settings given to `b.queue(...)` are stored with the group
(`queues/<topic>/<group>.json`, written atomically); arguments left as None keep
the stored values, and a new group starts from the defaults of SPEC §1. A limit
(`concurrency_per_key`, `key_rate_limit_per_s`, `rate_limit_per_s`) given as 0 is
removed.
"""

from __future__ import annotations

from typing import Any

import msgspec

from brook import limits, names, validate
from brook.errors import BadRequest
from brook.models import Backoff
from brook.queue.lifecycle import Settings

ORDERINGS = ("none", "key")

_decode = msgspec.json.Decoder(Settings).decode


def decode(raw: bytes) -> Settings:
    return _decode(raw)


def encode(settings: Settings) -> bytes:
    return msgspec.json.encode(settings)


def dead_letter_topic(topic: str, settings: Settings) -> str | None:
    """Where the group's dead records are copied: the topic given, or one derived
    from the group's topic (`<topic>.dlq`, always a valid name); None when they are
    kept in place (copy_dead false)."""
    if not settings.copy_dead:
        return None
    return settings.dead_letter_topic or names.dead_letters(topic)


def merge(topic: str, stored: Settings | None, **given: Any) -> Settings:
    """`stored` (or the defaults) with every argument that is not None applied,
    each checked; raises BadRequest or InvalidName naming the bad one."""
    base = stored or Settings()
    changes: dict[str, Any] = {}
    if given.get("visibility_timeout_ms") is not None:
        changes["visibility_timeout_ms"] = validate.whole(
            given["visibility_timeout_ms"],
            "visibility_timeout_ms",
            1,
            limits.visibility_timeout_ms_max,
        )
    if given.get("max_attempts") is not None:
        changes["max_attempts"] = validate.whole(
            given["max_attempts"], "max_attempts", 1, limits.queue_attempts_max
        )
    if given.get("expire_after_ms") is not None:
        # 0 removes the limit, as it does for the other limits
        expire = validate.whole(given["expire_after_ms"], "expire_after_ms", 0)
        changes["expire_after_ms"] = expire or None
    if given.get("ordering") is not None:
        if given["ordering"] not in ORDERINGS:
            raise BadRequest(f"ordering must be 'none' or 'key', not {given['ordering']!r}")
        changes["ordering"] = given["ordering"]
    if given.get("dead_letter_topic") is not None:
        dead_letters = validate.topic_name(given["dead_letter_topic"])
        if dead_letters == topic:
            raise BadRequest("dead_letter_topic must not be the queue's own topic")
        changes["dead_letter_topic"] = dead_letters
    if given.get("backoff") is not None:
        changes["backoff"] = backoff(given["backoff"])
    if given.get("copy_dead") is not None:
        changes["copy_dead"] = bool(given["copy_dead"])
    if given.get("concurrency_per_key") is not None:
        limit = validate.whole(
            given["concurrency_per_key"], "concurrency_per_key", 0, limits.queue_window_records_max
        )
        changes["concurrency_per_key"] = limit or None
    for name in ("key_rate_limit_per_s", "rate_limit_per_s"):
        if given.get(name) is not None:
            changes[name] = _number(given[name], name, 0.0, limits.rate_per_s_max) or None
    if given.get("lower_priority_share") is not None:
        changes["lower_priority_share"] = _number(
            given["lower_priority_share"], "lower_priority_share", 0.0, 1.0
        )
    merged = msgspec.structs.replace(base, **changes) if changes else base
    if merged.ordering == "key" and (merged.concurrency_per_key or 1) != 1:
        raise BadRequest(
            "ordering 'key' leases one record of a key at a time: concurrency_per_key must be "
            "1 or 0 (none) with it"
        )
    return merged


def backoff(given: Any) -> Backoff:
    """A Backoff from a Backoff or a mapping of its fields (missing ones default)."""
    if isinstance(given, Backoff):
        given = msgspec.structs.asdict(given)
    if not isinstance(given, dict):
        raise BadRequest("backoff must be an object with min_ms, factor, max_ms, jitter")
    unknown = set(given) - {"min_ms", "factor", "max_ms", "jitter"}
    if unknown:
        raise BadRequest(f"backoff has unknown fields: {sorted(unknown)}")
    default = Backoff()
    min_ms = validate.whole(given.get("min_ms", default.min_ms), "backoff.min_ms", 0)
    max_ms = validate.whole(given.get("max_ms", default.max_ms), "backoff.max_ms", min_ms)
    factor = _number(
        given.get("factor", default.factor), "backoff.factor", 1.0, limits.backoff_factor_max
    )
    jitter = _number(given.get("jitter", default.jitter), "backoff.jitter", 0.0, 1.0)
    return Backoff(min_ms=min_ms, factor=factor, max_ms=max_ms, jitter=jitter)


def _number(value: Any, what: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise BadRequest(f"{what} must be a number from {low} to {high}, not {value!r}")
    return float(value)


def as_json(settings: Settings, topic: str) -> dict[str, Any]:
    """The settings as the API shows them, the dead-letter topic resolved."""
    document: dict[str, Any] = msgspec.to_builtins(settings)
    document["dead_letter_topic"] = dead_letter_topic(topic, settings)
    return document
