"""GET /openapi.json: the API described from the router and the wire contract, so it stays true.

Every route the router serves must have an entry in OPERATIONS (a test checks
both ways). Paths, methods and security come from the router; the body and
answer schemas are generated from the Structs of `brook.wire`; what is left
here is route metadata: a summary, query parameters, which Struct goes where.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import msgspec

import brook
from brook import limits, names, wire
from brook.records import DeliveryStats, EndpointInfo, Published
from brook.server import query
from brook.server.router import Router

REF = "#/components/schemas/{name}"
COUNT = {"type": "integer", "minimum": 0, "maximum": query.WHOLE_MAX}
POSITIVE = {"type": "integer", "minimum": 1, "maximum": query.WHOLE_MAX}
NAME = {"type": "string", "pattern": names.USER_NAME_PATTERN}
ID = {"type": "string", "pattern": names.ID_PATTERN}
PATH_PARAMETERS = {
    "topic": NAME,
    "group": NAME,
    "timer": ID,
    "writer": ID,
    "part": ID,
    "endpoint": NAME,
    "seq": {"type": "integer", "minimum": 0, "maximum": limits.staging_seq_max},
    "chunk": {"type": "integer", "minimum": 0, "maximum": limits.staging_chunks_per_part_max - 1},
}


class Operation(NamedTuple):
    summary: str
    answer: type[msgspec.Struct] | None = None
    """The 200 answer's JSON shape (None: an object whose shape is not promised)."""
    body: type[msgspec.Struct] | None = None
    """The JSON request body's shape."""
    body_required: bool = True
    query: tuple[tuple[str, dict[str, Any], str, bool], ...] = ()
    """(name, schema, description, required) of each query parameter."""
    binary: tuple[str, ...] = ()
    """Media types taken besides JSON, as binary bodies."""
    text_answer: bool = False
    relations: tuple[tuple[str, str], ...] = ()
    """Rules JSON Schema cannot state (between fields, with the path, with the time):
    (the sentence the description gives, a pattern of the 400's message that keeps it)."""


WAIT = ("wait_ms", COUNT, f"Long-poll up to this long (capped at {limits.wait_ms_max})", False)
PARTITION = ("partition", COUNT, "Every record goes to this partition (default: by key)", False)
START = (
    "start",
    {"enum": ["earliest", "latest"]},
    "Where a group new to the broker starts (default earliest)",
    False,
)
BACKOFF_RELATION = (
    "backoff.max_ms is at least backoff.min_ms (those given, or those stored)",
    r"backoff\.max_ms must be at least",
)


PAST_THE_END = (
    "an offset is at most its partition's end (the next offset to be written)",
    r"is past the end of partition",
)
QUEUE = "/v1/topics/{topic}/queues/{group}"
STAGED = "/v1/topics/{topic}/staged/{writer}/{seq}"
ENDPOINT = "/v1/endpoints/{endpoint}"

OPERATIONS: dict[tuple[str, str], Operation] = {
    ("GET", "/v1/health"): Operation("Ready to serve; 503 names the failing loops", wire.Health),
    ("GET", "/openapi.json"): Operation("This description"),
    ("GET", "/metrics"): Operation("Prometheus metrics", text_answer=True),
    ("GET", "/v1/topics"): Operation("List topics", wire.Topics),
    ("PUT", "/v1/topics/{topic}"): Operation(
        "Create a topic (the same settings again is a no-op)",
        wire.TopicOut,
        wire.TopicSettingsIn,
        body_required=False,
    ),
    ("GET", "/v1/topics/{topic}"): Operation("Describe a topic", wire.TopicDetail),
    ("DELETE", "/v1/topics/{topic}"): Operation("Delete a topic", wire.Deleted),
    ("POST", "/v1/topics/{topic}/records"): Operation(
        "Append records; answered once they are durable",
        wire.Acks,
        wire.RecordsIn,
        query=(("key", {"type": "string"}, "Key of a raw-body record", False), PARTITION),
        binary=(wire.RAW_TYPE, wire.BATCH_TYPE),
    ),
    ("GET", "/v1/topics/{topic}/records"): Operation(
        "Read records at offsets >= offset",
        wire.RecordPage,
        query=(
            ("partition", COUNT, "Partition (default 0)", False),
            ("offset", COUNT, "First offset (default 0)", False),
            ("limit", POSITIVE, f"Most records (capped at {limits.read_records_max})", False),
            WAIT,
        ),
    ),
    ("GET", "/v1/topics/{topic}/groups/{group}/poll"): Operation(
        "Poll a stream group (advances its position)",
        wire.Polled,
        query=(
            ("max_records", POSITIVE, "Most records", False),
            WAIT,
            START,
        ),
    ),
    ("POST", "/v1/topics/{topic}/groups/{group}/commit"): Operation(
        "Commit the group's position, or the offsets given",
        wire.GroupOut,
        wire.CommitIn,
        body_required=False,
        query=(START,),
        relations=(PAST_THE_END,),
    ),
    ("POST", "/v1/topics/{topic}/groups/{group}/seek"): Operation(
        "Move the group's position on one partition (at most its end)",
        wire.GroupOut,
        wire.SeekIn,
        query=(START,),
        relations=(PAST_THE_END,),
    ),
    ("GET", "/v1/topics/{topic}/groups/{group}"): Operation(
        "A stream group's positions and lag", wire.GroupOut, query=(START,)
    ),
    ("PUT", QUEUE): Operation(
        "Create a queue group or change its settings (null keeps a setting)",
        wire.QueueOut,
        wire.QueueSettingsIn,
        body_required=False,
        relations=(
            BACKOFF_RELATION,
            (
                "dead_letter_topic is not the queue's own topic",
                r"dead_letter_topic must not be the queue's own topic",
            ),
        ),
        query=(
            (
                "create",
                {"type": "boolean"},
                "false: only change an existing group (404 if there is none); default true, "
                "which also creates the topic when the key may append to it",
                False,
            ),
        ),
    ),
    ("GET", QUEUE): Operation(
        "A queue group's settings and records by state (404 if it does not exist)",
        wire.QueueOut,
    ),
    ("POST", QUEUE + "/lease"): Operation(
        "Lease records (long-polls up to wait_ms); answered once durable",
        wire.Jobs,
        wire.LeaseIn,
        body_required=False,
    ),
    ("POST", QUEUE + "/ack"): Operation("The records are done", wire.Settled, wire.SettleIn),
    ("POST", QUEUE + "/nack"): Operation(
        "The attempts failed: retry after delay_ms or the backoff", wire.Settled, wire.NackIn
    ),
    ("POST", QUEUE + "/extend"): Operation(
        "Keep the leases ms longer from now", wire.Settled, wire.ExtendIn
    ),
    ("POST", QUEUE + "/discard"): Operation(
        "Dead at once, copied to the dead-letter topic", wire.Settled, wire.SettleIn
    ),
    ("GET", QUEUE + "/trace"): Operation(
        "A record's transitions in the status log",
        wire.Trace,
        query=(
            ("partition", COUNT, "The record's partition", True),
            ("offset", COUNT, "The record's offset", True),
        ),
    ),
    ("POST", QUEUE + "/redrive"): Operation(
        "Put dead records back to work (all, those named in records, or up to limit); "
        "records that are not dead are left as they are; idempotent",
        wire.Redriven,
        wire.RedriveIn,
        body_required=False,
    ),
    ("POST", "/v1/timers"): Operation(
        'Schedule a timer, or many ({"timers": [...]}); answered once durable',
        wire.Scheduled,
        wire.TimerIn,
        relations=(
            (
                "at is no more than 24 hours ago (an at in seconds, not milliseconds, would "
                "be) and no more than 100 years ahead",
                r"more than 24 hours ago|at most 100 years ahead",
            ),
        ),
    ),
    ("GET", "/v1/timers/{timer}"): Operation(
        "A timer's state: pending, fired (where) or cancelled", wire.TimerOut
    ),
    ("DELETE", "/v1/timers/{timer}"): Operation(
        "Cancel a pending timer (409 if it fired or was cancelled, 404 if unknown)",
        wire.Cancelled,
    ),
    ("PUT", STAGED + "/{part}/{chunk}"): Operation(
        "Stage records for a publish (durable; nothing is readable until then)",
        wire.Staged,
        wire.StagedRecordsIn,
        query=(PARTITION,),
        binary=(wire.BATCH_TYPE,),
    ),
    ("POST", STAGED + "/publish"): Operation(
        "Publish what was staged for seq, exactly once; answered once durable",
        Published,
        wire.PublishIn,
    ),
    ("DELETE", STAGED): Operation(
        "Drop what was staged for seq (false if it was published)", wire.Dropped
    ),
}
OPERATIONS.update(
    {
        ("GET", "/v1/endpoints"): Operation("List delivery endpoints (no secrets)", wire.Endpoints),
        ("PUT", ENDPOINT): Operation(
            "Create a delivery endpoint (url and topics needed) or change its settings; "
            "the answer shows a secret made or given, once",
            EndpointInfo,
            wire.EndpointIn,
            relations=(
                BACKOFF_RELATION,
                (
                    "headers may not set host, content-length, content-type, "
                    "transfer-encoding, connection, webhook-* or brook-* (the broker's own)",
                    r"is set by the broker",
                ),
                (
                    "a new endpoint (none has the name) needs url and topics",
                    r"a new endpoint needs a url and topics",
                ),
                (
                    "a url at a loopback, private or link-local address is refused unless "
                    "the broker allows private networks (delivery_allow_private_networks)",
                    r"endpoints are called only at public addresses",
                ),
            ),
        ),
        ("GET", ENDPOINT): Operation("An endpoint's settings", EndpointInfo),
        ("DELETE", ENDPOINT): Operation("Delete an endpoint and its queue groups", wire.Deleted),
        ("GET", ENDPOINT + "/stats"): Operation(
            "Records by state, in flight, breaker, success rate, latency", DeliveryStats
        ),
        ("GET", ENDPOINT + "/attempts"): Operation(
            "Every attempt to deliver one record",
            wire.Attempts,
            query=(
                ("topic", {"type": "string"}, "The record's topic", True),
                ("partition", COUNT, "The record's partition", True),
                ("offset", COUNT, "The record's offset", True),
            ),
        ),
        ("POST", ENDPOINT + "/redrive"): Operation(
            "Put dead records back to work (of one topic or all, up to limit, or those named)",
            wire.Redriven,
            wire.EndpointRedriveIn,
            body_required=False,
        ),
        ("POST", ENDPOINT + "/enable"): Operation("Deliver again", EndpointInfo),
        ("POST", ENDPOINT + "/disable"): Operation("Stop delivering; records wait", EndpointInfo),
        ("POST", ENDPOINT + "/test"): Operation(
            "Send a signed test request now and tell how it went", wire.TestOut
        ),
        ("POST", ENDPOINT + "/rotate-secret"): Operation(
            "A new secret (made, or the one given); the old one signs too for a day",
            wire.Rotated,
            wire.RotateIn,
            body_required=False,
        ),
    }
)
ALTERNATIVES: dict[tuple[str, str], tuple[type[msgspec.Struct], type[msgspec.Struct]]] = {
    ("POST", "/v1/timers"): (wire.TimersIn, wire.ScheduledMany),
}
"""A second body shape a route takes, and the answer it gives to that one."""


def _ref(kind: type[msgspec.Struct]) -> dict[str, str]:
    return {"$ref": REF.format(name=kind.__name__)}


def _either(kinds: list[type[msgspec.Struct]]) -> dict[str, Any]:
    return _ref(kinds[0]) if len(kinds) == 1 else {"oneOf": [_ref(k) for k in kinds]}


def _operation(method: str, template: str, operation: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": operation.summary}
    if operation.relations:
        out["description"] = "Also: " + "; ".join(s for s, _ in operation.relations) + "."
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": schema}
        for name, schema in PATH_PARAMETERS.items()
        if "{" + name + "}" in template
    ] + [
        {"name": name, "in": "query", "required": required, "schema": schema, "description": text}
        for name, schema, text, required in operation.query
    ]
    if parameters:
        out["parameters"] = parameters
    other = ALTERNATIVES.get((method, template))
    if operation.body is not None:
        bodies = [operation.body] + ([other[0]] if other else [])
        content = {wire.JSON_TYPE: {"schema": _either(bodies)}}
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
    kinds = {*wire.REQUESTS, *wire.ANSWERS, *wire.ALSO_ANSWERS}
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
    for method, template, route in router.routes():
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
