"""Does a JSON document name a key twice in one object? Pure: no I/O.

RFC 8259 leaves duplicate names to the parser, and parsers differ (msgspec keeps
the last, others the first): a proxy that checks one `value` while Brook stores
the other is a classic way in. So request bodies that repeat a name are refused.

msgspec, which decodes the bodies, keeps the last silently, and Python's json
module, which can see every pair, costs twice msgspec's decode on a batch of
records. So the check counts instead, and parses again only when counting
cannot tell:

1. Every colon outside a string separates a key from its value, so a body with
   exactly as many colons as the decoded value holds keys repeats none (one
   byte count: ~9 µs for 32 records of 1 KB).
2. When strings hold colons too, count the keys themselves: a quote followed by
   a colon (after white space) ends a key, if it is not escaped. With no escaped
   quote before a colon anywhere, equal counts again mean no repeat.
3. Otherwise (or when the counts differ, for example because a field was given
   as null or as its default): parse again with every pair (the exact check).

Each count can only be too high (a colon or a quote inside a string), never too
low, and a repeated key makes the body hold more keys than the value: so equal
counts prove there is no repeat, and a count that is off only costs time.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

_KEY_END = re.compile(rb'"\s*:')
_ESCAPED_KEY_END = re.compile(rb'\\"\s*:')


def has_duplicates(body: bytes, decoded: Any) -> bool:
    """Whether `body`, valid JSON that msgspec decoded to `decoded` (a Struct, dict,
    list or scalar), repeats a name within one object."""
    held = _held_keys(decoded)
    if body.count(b":") == held:
        return False
    escaped = b"\\" in body and _ESCAPED_KEY_END.search(body) is not None
    if not escaped and len(_KEY_END.findall(body)) == held:
        return False
    return _exact(body)


def _held_keys(value: Any) -> int:
    """Keys a decoded value would have needed at least: fields that are set to
    something other than their default, and every dict entry."""
    if isinstance(value, msgspec.Struct):
        counted = getattr(value, "keys_held", None)
        if counted is not None:  # a hot shape counts itself, faster
            return int(counted())
        count = 0
        defaults = _defaults(type(value))
        for name in value.__struct_fields__:
            field = getattr(value, name)
            if name in defaults and field == defaults[name]:
                continue
            count += 1 + _held_keys(field)
        return count
    if isinstance(value, dict):
        return len(value) + sum(_held_keys(v) for v in value.values())
    if isinstance(value, list):
        return sum(_held_keys(v) for v in value)
    return 0


_defaults_of: dict[type, dict[str, Any]] = {}


def _defaults(kind: type[msgspec.Struct]) -> dict[str, Any]:
    found = _defaults_of.get(kind)
    if found is None:
        found = {
            field.name: field.default
            for field in msgspec.structs.fields(kind)
            if field.default is not msgspec.NODEFAULT
        }
        for field in msgspec.structs.fields(kind):
            if field.default_factory is not msgspec.NODEFAULT:
                found[field.name] = field.default_factory()
        _defaults_of[kind] = found
    return found


class _Repeated(Exception):
    pass


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _Repeated
    return found


def _exact(body: bytes) -> bool:
    try:
        json.loads(body, object_pairs_hook=_refuse_repeats)
    except _Repeated:
        return True
    except (ValueError, RecursionError):
        return False  # not for this check to judge: msgspec accepted it
    return False
