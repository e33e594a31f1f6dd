"""GET /openapi.json: the table of operations (brook/operations.py) and the wire
contract rendered as OpenAPI 3.1, so the document says what the server does.

The router serves exactly the table's operations (a test checks both ways); the
body and answer schemas are generated from the Structs of `brook.wire`, with the
patterns and rules the server holds requests to.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

import brook
from brook import names, wire
from brook.operations import ALTERNATIVES, BY_ROUTE, PATH_PARAMETERS, TABLE, Operation
from brook.server.router import Router

REF = "#/components/schemas/{name}"
OPERATIONS = BY_ROUTE
"""The operations by (method, path template), as the router serves them."""


def _ref(kind: type[msgspec.Struct]) -> dict[str, str]:
    return {"$ref": REF.format(name=kind.__name__)}


def _either(kinds: list[type[msgspec.Struct]]) -> dict[str, Any]:
    return _ref(kinds[0]) if len(kinds) == 1 else {"oneOf": [_ref(k) for k in kinds]}


def _operation(method: str, template: str, operation: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": operation.name, "summary": operation.summary}
    if operation.relations:
        out["description"] = "Also: " + "; ".join(s for s, _ in operation.relations) + "."
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": schema}
        for name, schema in PATH_PARAMETERS.items()
        if "{" + name + "}" in template
    ] + [
        {
            "name": param.name,
            "in": "query",
            "required": param.required,
            "schema": param.schema(),
            "description": param.sentence(),
        }
        for param in operation.query
    ]
    if parameters:
        out["parameters"] = parameters
    other = ALTERNATIVES.get((method, template))
    if operation.body is not None:
        bodies = [operation.body] + ([other[0]] if other else [])
        content: dict[str, Any] = {wire.JSON_TYPE: {"schema": _either(bodies)}}
        if operation.example is not None:
            content[wire.JSON_TYPE]["example"] = operation.example
        for media in operation.binary:
            content[media] = {"schema": {"type": "string", "format": "binary"}}
        out["requestBody"] = {"required": operation.body_required, "content": content}
    if operation.text_answer:
        answer: dict[str, Any] = {"text/plain": {"schema": {"type": "string"}}}
    else:
        answers = [operation.answer] + ([other[1]] if other else []) if operation.answer else []
        answer = {wire.JSON_TYPE: {"schema": _either(answers) if answers else {"type": "object"}}}
    out["responses"] = {
        "200": {"description": "OK", "content": answer},
        "default": {
            "description": "An error",
            "content": {wire.JSON_TYPE: {"schema": _ref(wire.ErrorOut)}},
        },
    }
    return out


def _schemas() -> dict[str, Any]:
    kinds: set[type[msgspec.Struct]] = {*wire.REQUESTS, *wire.ANSWERS, *wire.ALSO_ANSWERS}
    kinds |= {op.answer for op in TABLE if op.answer is not None}  # a new row's shapes too
    kinds |= {op.body for op in TABLE if op.body is not None}
    _, components = msgspec.json.schema_components(
        sorted(kinds, key=lambda k: k.__name__), ref_template=REF
    )
    for title, schema in components.items():
        _state_base64(schema)
        kind = getattr(wire, title, None)
        if isinstance(kind, type) and issubclass(kind, wire.In):  # what a client may send
            _state_user_names(schema)
            rules = _pair_rules(kind)
            if rules:
                schema["allOf"] = rules
    return components


def _state_user_names(schema: Any) -> None:
    """Names a request gives are users' names: not the reserved `__` ones, "." or ".."."""
    for part in _parts(schema):
        if part.get("pattern") == names.NAME_PATTERN:
            part["pattern"] = names.USER_NAME_PATTERN


def _state_base64(schema: Any) -> None:
    """Give every base64 string the pattern the server holds it to (msgspec's schema
    says only `contentEncoding`, which validators take as a note)."""
    for part in _parts(schema):
        if part.get("contentEncoding") == "base64":
            part["pattern"] = wire.BASE64_PATTERN


def _parts(schema: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object inside a schema, itself included."""
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _parts(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _parts(value)


def _pair_rules(kind: type[msgspec.Struct]) -> list[dict[str, Any]]:
    """A request's `one_at_most` and `one_at_least` pairs (wire.RecordFields) as JSON
    Schema: a field is given when it is present and not null."""
    given = {"not": {"type": "null"}}
    rules: list[dict[str, Any]] = [
        {"not": {"required": list(pair), "properties": dict.fromkeys(pair, given)}}
        for pair in getattr(kind, "one_at_most", ())
    ]
    rules += [
        {"anyOf": [{"required": [field], "properties": {field: given}} for field in pair]}
        for pair in getattr(kind, "one_at_least", ())
    ]
    return rules


def document(router: Router, with_keys: bool) -> dict[str, Any]:
    """The OpenAPI 3.1 description of every route `router` serves."""
    paths: dict[str, dict[str, Any]] = {}
    for method, template, route in router.routes("api"):
        operation = _operation(method, template, OPERATIONS[(method, template)])
        if with_keys and route.scope is not None:
            operation["security"] = [{"bearer": []}]
            needs = f"Needs an API key with the {route.scope!r} scope."
            also = operation.get("description")
            operation["description"] = f"{needs} {also}" if also else needs
        paths.setdefault(template, {})[method.lower()] = operation
    components: dict[str, Any] = {"schemas": _schemas()}
    if with_keys:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Brook", "version": brook.__version__},
        "paths": paths,
        "components": components,
    }
