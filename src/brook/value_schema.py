"""A topic's value schema: the JSON Schema its values follow, so the lake can keep
their fields as typed columns (brook/lake/typed.py). Pure: no I/O, no pyarrow.

Brook reads the part of JSON Schema that says what a column's type is, and leaves
the rest (`required`, `description`, `minimum`, ...) to the schema's own tools:

- the root is `{"type": "object", "properties": {...}}`;
- a property's `type` is `string` (with `"format": "date-time"`: a timestamp),
  `integer`, `number`, `boolean`, `object` (with `properties`) or `array` (with
  `items`); a list of types with `"null"` in it means the other one; a property
  with no `type` is kept as its JSON text.

The schema never refuses a record: a value that is not JSON, or a field of
another type than declared, is null in its column (the value itself is kept).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from brook import limits
from brook.errors import BadRequest

TYPES = ("string", "integer", "number", "boolean", "object", "array")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
"""A property name that is a column name in every reader (Spark, DuckDB, Polars)."""


def check(schema: Any) -> dict[str, Any]:
    """The schema, if Brook can keep typed columns by it; else BadRequest saying why."""
    if not isinstance(schema, dict):
        raise BadRequest(
            "value_schema must be a JSON Schema object, such as "
            '{"type": "object", "properties": {"amount": {"type": "number"}}}'
        )
    try:
        size = len(msgspec.json.encode(schema))
    except (TypeError, msgspec.EncodeError):
        raise BadRequest("value_schema must be JSON: objects, lists, text, numbers") from None
    if size > limits.value_schema_bytes_max:
        raise BadRequest(f"value_schema is larger than {limits.value_schema_bytes_max} bytes")
    if _types(schema, "value_schema") != ["object"] or not schema.get("properties"):
        raise BadRequest(
            'value_schema must describe an object with properties: {"type": "object", '
            '"properties": {...}} (its properties become the typed columns)'
        )
    counted = [0]
    _check_object(schema, "value_schema", 1, counted)
    return schema


def kind(prop: dict[str, Any]) -> str:
    """What a checked property is: one of TYPES, "date-time", or "json" (no type)."""
    types = [t for t in _types(prop, "") if t != "null"]
    if not types:
        return "json"
    if types[0] == "string" and prop.get("format") == "date-time":
        return "date-time"
    return types[0]


def _types(prop: Any, where: str) -> list[str]:
    given = prop.get("type") if isinstance(prop, dict) else None
    if given is None:
        return []
    listed = [given] if isinstance(given, str) else given
    if not isinstance(listed, list) or not all(isinstance(t, str) for t in listed):
        raise BadRequest(f"{where}: type must be a string or a list of strings")
    return listed


def _check_object(schema: dict[str, Any], where: str, depth: int, counted: list[int]) -> None:
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise BadRequest(f"{where}: properties must be an object of name -> schema")
    for name, prop in properties.items():
        at = f"{where}.{name}"
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise BadRequest(
                f"{at}: a property name becomes a column: use 1 to 128 of A-Z a-z 0-9 _, "
                "not starting with a digit"
            )
        counted[0] += 1
        if counted[0] > limits.value_schema_properties_max:
            raise BadRequest(
                f"value_schema has more than {limits.value_schema_properties_max} properties"
            )
        _check_property(prop, at, depth, counted)


def _check_property(prop: Any, where: str, depth: int, counted: list[int]) -> None:
    if not isinstance(prop, dict):
        raise BadRequest(f"{where}: a property's schema must be an object")
    types = [t for t in _types(prop, where) if t != "null"]
    if len(types) > 1:
        raise BadRequest(f"{where}: one type (and null) per column, not {types}")
    if types and types[0] not in TYPES:
        raise BadRequest(f"{where}: type {types[0]!r} is not one of {', '.join(TYPES)}")
    found = kind(prop)
    if found in ("object", "array") and depth >= limits.value_schema_depth_max:
        raise BadRequest(f"{where}: nested deeper than {limits.value_schema_depth_max} levels")
    if found == "object":
        if not prop.get("properties"):
            raise BadRequest(f"{where}: an object needs properties (or leave out its type)")
        _check_object(prop, where, depth + 1, counted)
    elif found == "array":
        items = prop.get("items")
        if not isinstance(items, dict):
            raise BadRequest(f"{where}: an array needs items, the schema of each item")
        _check_property(items, f"{where}[]", depth + 1, counted)
