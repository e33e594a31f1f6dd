"""Typed columns: a topic's values decoded once, as the lake writes them, by the JSON
Schema declared on the topic (brook/value_schema.py), into one struct column
`fields` beside `value`, so a reader filters and sums `fields.amount` without
parsing JSON on every query.

Each value is decoded with msgspec and each field coerced to its column's type;
what does not fit (not JSON, not an object, a field of another type, an integer
beyond 64 bits, a date-time that does not parse) is null, never an error: the
record is in the log already, and its `value` column keeps it whole.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import msgspec
import pyarrow as pa

from brook import value_schema

FIELDS = "fields"
"""The struct column of the typed fields."""
_INT64 = (-(2**63), 2**63 - 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

Convert = Callable[[Any], Any]


def struct_type(schema: dict[str, Any]) -> pa.StructType:
    """The `fields` column's type for a checked value schema."""
    return pa.struct([(n, _type(p)) for n, p in schema["properties"].items()])


def fields_column(values: list[bytes | None], schema: dict[str, Any]) -> pa.Array:
    """The `fields` column of `values` (one row each)."""
    convert = _object(schema)
    decode = msgspec.json.decode
    rows = []
    for value in values:
        try:
            rows.append(convert(decode(value)) if value is not None else None)
        except msgspec.DecodeError:
            rows.append(None)
    return pa.array(rows, struct_type(schema))


def _type(prop: dict[str, Any]) -> pa.DataType:
    found = value_schema.kind(prop)
    if found == "object":
        return struct_type(prop)
    if found == "array":
        return pa.list_(_type(prop["items"]))
    return _SCALARS[found]


def _converter(prop: dict[str, Any]) -> Convert:
    found = value_schema.kind(prop)
    if found == "object":
        return _object(prop)
    if found == "array":
        each = _converter(prop["items"])
        return lambda v: [each(item) for item in v] if isinstance(v, list) else None
    return _CONVERTERS[found]


def _object(schema: dict[str, Any]) -> Convert:
    fields = [(name, _converter(prop)) for name, prop in schema["properties"].items()]

    def convert(value: Any) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            return None
        return {name: each(value.get(name)) for name, each in fields}

    return convert


def _string(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _integer(v: Any) -> int | None:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v <= _INT64[1]:
        return v
    return None


def _number(v: Any) -> float | None:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    return None


def _boolean(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def _date_time(v: Any) -> int | None:
    """Microseconds since the epoch of an RFC 3339 date-time (UTC when it has no offset)."""
    if not isinstance(v, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(v)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _json(v: Any) -> str | None:
    return None if v is None else msgspec.json.encode(v).decode()


_SCALARS: dict[str, pa.DataType] = {
    "string": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
    "date-time": pa.timestamp("us", tz="UTC"),
    "json": pa.string(),
}
_CONVERTERS: dict[str, Convert] = {
    "string": _string,
    "integer": _integer,
    "number": _number,
    "boolean": _boolean,
    "date-time": _date_time,
    "json": _json,
}
