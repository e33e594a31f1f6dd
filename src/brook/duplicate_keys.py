"""Does a JSON document name a key twice in one object? Pure: no I/O.

RFC 8259 leaves duplicate names to the parser, and parsers differ (msgspec keeps
the last, others the first): a proxy that checks one `value` while Brook stores
the other is a classic way in. So request bodies that repeat a name are refused.

msgspec, which decodes the bodies, keeps the last silently, and Python's json
module, which can see every pair, costs twice msgspec's decode on a batch of
records. So the check is in two steps:

1. Cheap and exact for compact JSON: count the keys written in the body (every
   `":` that is not an escaped quote inside a string) and compare with the keys
   the decoded value holds. Equal means no name was repeated. It is only trusted
   when no quote is followed by white space and no key ends in a backslash,
   which are the two ways a key can hide from the count.
2. Otherwise (or when the counts differ, for example because a field was given
   as null or as its default), the exact check: parse again with every pair.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_QUOTE_THEN_SPACE = (b'" ', b'"\n', b'"\r', b'"\t')


def has_duplicates(body: bytes, decoded: Any) -> bool:
    """Whether `body`, valid JSON that msgspec decoded to `decoded` (a Struct, dict,
    list or scalar), repeats a name within one object."""
    if _countable(body) and _written_keys(body) == _held_keys(decoded):
        return False
    return _exact(body)


def _countable(body: bytes) -> bool:
    return b'\\":' not in body and not any(pattern in body for pattern in _QUOTE_THEN_SPACE)


def _written_keys(body: bytes) -> int:
    """Keys in a valid, countable JSON body: a quote followed by a colon ends a key,
    unless it is an escaped quote inside a string (a string's own closing quote
    cannot be followed by a colon unless the string is a key)."""
    return body.count(b'":') - body.count(b'\\":')


def _held_keys(value: Any) -> int:
    """Keys a decoded value would have needed at least: fields that are set to
    something other than their default, and every dict entry."""
    if isinstance(value, msgspec.Struct):
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
