"""GET /openapi.json: the API described from the router itself, so it stays true.

Every route the router serves must have an entry in OPERATIONS (a test checks
both ways); paths, methods and security come from the router, the rest from here.
"""

from __future__ import annotations

from typing import Any

import brook
from brook import limits
from brook.server.router import Router

NAME = {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,200}$"}
TIMER_ID = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,200}$"}
COUNT = {"type": "integer", "minimum": 0}
BYTES_FIELD = {"type": "string"}
ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}
RECORD_IN = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "value": BYTES_FIELD,
        "value_b64": {"type": "string", "format": "byte"},
        "key": BYTES_FIELD,
        "key_b64": {"type": "string", "format": "byte"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "headers_b64": {
            "type": "object",
            "additionalProperties": {"type": "string", "format": "byte"},
        },
        "idempotency_key": {
            "type": "string",
            "minLength": 1,
            "maxLength": limits.idempotency_key_bytes_max,
        },
    },
}
RECORD_OUT = {
    "type": "object",
    "required": ["partition", "offset", "timestamp", "value_b64", "headers_b64"],
    "properties": {
        "partition": COUNT,
        "offset": COUNT,
        "timestamp": {"type": "integer"},
        "key": {"type": "string"},
        "key_b64": {"type": "string"},
        "value": {"type": "string"},
        "value_b64": {"type": "string"},
        "headers": {"type": "object"},
        "headers_b64": {"type": "object"},
    },
}
TOPIC = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "partitions": COUNT,
        "retention_ms": {"type": "integer", "nullable": True},
        "retention_bytes": {"type": "integer", "nullable": True},
        "compaction": {"type": "boolean"},
        "end_offsets": {"type": "object", "additionalProperties": COUNT},
    },
}
TOPIC_SETTINGS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "partitions": {"type": "integer", "minimum": 1, "maximum": limits.partitions_max},
        "retention_ms": {"type": "integer", "minimum": 1, "nullable": True},
        "retention_bytes": {"type": "integer", "minimum": 1, "nullable": True},
        "compaction": {"type": "boolean"},
    },
}
GROUP = {
    "type": "object",
    "properties": {
        "topic": {"type": "string"},
        "group": {"type": "string"},
        "positions": {"type": "object"},
        "committed": {"type": "object"},
        "lag": {"type": "object"},
    },
}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def _json_body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _ok(schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": "OK", "content": {"application/json": {"schema": schema}}}


WAIT = _query(
    "wait_ms", {"type": "integer", "minimum": 0}, "Long-poll up to this long (capped at 30000)"
)
RECORDS_JSON = {
    "schema": {
        "type": "object",
        "required": ["records"],
        "properties": {"records": {"type": "array", "items": RECORD_IN}},
    }
}
BINARY = {"schema": {"type": "string", "format": "binary"}}
OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/v1/health"): {
        "summary": "Ready to serve",
        "responses": {"200": _ok({"type": "object"})},
    },
    ("GET", "/openapi.json"): {
        "summary": "This description",
        "responses": {"200": _ok({"type": "object"})},
    },
    ("GET", "/metrics"): {
        "summary": "Prometheus metrics",
        "responses": {
            "200": {"description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}}
        },
    },
    ("GET", "/v1/topics"): {
        "summary": "List topics",
        "responses": {
            "200": _ok(
                {"type": "object", "properties": {"topics": {"type": "array", "items": TOPIC}}}
            )
        },
    },
    ("PUT", "/v1/topics/{topic}"): {
        "summary": "Create a topic (the same settings again is a no-op)",
        "requestBody": _json_body(TOPIC_SETTINGS, required=False),
        "responses": {"200": _ok(TOPIC)},
    },
    ("GET", "/v1/topics/{topic}"): {
        "summary": "Describe a topic",
        "responses": {"200": _ok(TOPIC)},
    },
    ("DELETE", "/v1/topics/{topic}"): {
        "summary": "Delete a topic",
        "responses": {"200": _ok({"type": "object"})},
    },
    ("POST", "/v1/topics/{topic}/records"): {
        "summary": "Append records; answered once they are durable",
        "parameters": [
            _query("key", {"type": "string"}, "Key of a raw-body record"),
            _query("partition", COUNT, "Append every record to this partition (default: by key)"),
        ],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": RECORDS_JSON,
                "application/octet-stream": BINARY,
                "application/vnd.brook.batch": BINARY,
            },
        },
        "responses": {
            "200": _ok(
                {
                    "type": "object",
                    "properties": {
                        "acks": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "partition": COUNT,
                                    "offset": COUNT,
                                    "timestamp": {"type": "integer"},
                                },
                            },
                        }
                    },
                }
            )
        },
    },
    ("GET", "/v1/topics/{topic}/records"): {
        "summary": "Read records at offsets >= offset",
        "parameters": [
            _query("partition", COUNT, "Partition (default 0)"),
            _query("offset", COUNT, "First offset (default 0)"),
            _query("limit", COUNT, f"Most records (capped at {limits.read_records_max})"),
            WAIT,
        ],
        "responses": {
            "200": _ok(
                {
                    "type": "object",
                    "properties": {
                        "records": {"type": "array", "items": RECORD_OUT},
                        "next_offset": COUNT,
                    },
                }
            )
        },
    },
    ("GET", "/v1/topics/{topic}/groups/{group}/poll"): {
        "summary": "Poll a stream group (advances its position)",
        "parameters": [
            _query("max_records", {"type": "integer", "minimum": 1}, "Most records"),
            WAIT,
        ],
        "responses": {
            "200": _ok(
                {
                    "type": "object",
                    "properties": {"records": {"type": "array", "items": RECORD_OUT}},
                }
            )
        },
    },
    ("POST", "/v1/topics/{topic}/groups/{group}/commit"): {
        "summary": "Commit the group's position, or the offsets given",
        "requestBody": _json_body(
            {
                "type": "object",
                "properties": {"offsets": {"type": "object", "additionalProperties": COUNT}},
            },
            required=False,
        ),
        "responses": {"200": _ok(GROUP)},
    },
    ("POST", "/v1/topics/{topic}/groups/{group}/seek"): {
        "summary": "Move the group's position on one partition",
        "requestBody": _json_body(
            {
                "type": "object",
                "required": ["partition", "offset"],
                "additionalProperties": False,
                "properties": {"partition": COUNT, "offset": COUNT},
            }
        ),
        "responses": {"200": _ok(GROUP)},
    },
    ("GET", "/v1/topics/{topic}/groups/{group}"): {
        "summary": "A stream group's positions and lag",
        "responses": {"200": _ok(GROUP)},
    },
}


BACKOFF = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "min_ms": COUNT,
        "max_ms": COUNT,
        "factor": {"type": "number", "minimum": 1, "maximum": 100},
        "jitter": {"type": "number", "minimum": 0, "maximum": 1},
    },
}
QUEUE_SETTINGS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "visibility_timeout_ms": {
            "type": "integer",
            "minimum": 1,
            "maximum": limits.visibility_timeout_ms_max,
            "nullable": True,
        },
        "max_attempts": {
            "type": "integer",
            "minimum": 1,
            "maximum": limits.queue_attempts_max,
            "nullable": True,
        },
        "ordering": {"type": "string", "enum": ["none", "key"], "nullable": True},
        "dead_letter_topic": {**NAME, "nullable": True},
        "backoff": {**BACKOFF, "nullable": True},
        "expire_after_ms": {"type": "integer", "minimum": 1, "nullable": True},
    },
}
QUEUE = {
    "type": "object",
    "properties": {
        "topic": {"type": "string"},
        "group": {"type": "string"},
        "settings": {"type": "object"},
        "stats": {
            "type": "object",
            "properties": {
                name: COUNT
                for name in ("ready", "leased", "retrying", "dead", "acked", "oldest_ready_age_ms")
            },
        },
    },
}
JOB_OUT = {
    **RECORD_OUT,
    "required": [*RECORD_OUT["required"], "attempt", "receipt"],
    "properties": {
        **RECORD_OUT["properties"],  # type: ignore[dict-item]
        "attempt": {"type": "integer", "minimum": 1},
        "receipt": {"type": "string"},
    },
}
RECEIPTS = {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}
REASON = {"type": "string", "maxLength": limits.queue_reason_chars_max}
SETTLED = _ok({"type": "object", "properties": {"settled": COUNT}})


def _settle(summary: str, extra: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "summary": summary,
        "requestBody": _json_body(
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["receipts", *required],
                "properties": {"receipts": RECEIPTS, "reason": REASON, **extra},
            }
        ),
        "responses": {"200": SETTLED},
    }


QUEUE_PATH = "/v1/topics/{topic}/queues/{group}"
OPERATIONS.update(
    {
        ("PUT", QUEUE_PATH): {
            "summary": "Create a queue group or change its settings (null keeps a setting)",
            "requestBody": _json_body(QUEUE_SETTINGS, required=False),
            "responses": {"200": _ok(QUEUE)},
        },
        ("GET", QUEUE_PATH): {
            "summary": "A queue group's settings and records by state",
            "responses": {"200": _ok(QUEUE)},
        },
        ("POST", QUEUE_PATH + "/lease"): {
            "summary": "Lease records (long-polls up to wait_ms); answered once durable",
            "requestBody": _json_body(
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "max_records": {"type": "integer", "minimum": 1},
                        "wait_ms": COUNT,
                        "visibility_timeout_ms": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": limits.visibility_timeout_ms_max,
                        },
                    },
                },
                required=False,
            ),
            "responses": {
                "200": _ok(
                    {"type": "object", "properties": {"jobs": {"type": "array", "items": JOB_OUT}}}
                )
            },
        },
        ("POST", QUEUE_PATH + "/ack"): _settle("The records are done", {}, []),
        ("POST", QUEUE_PATH + "/nack"): _settle(
            "The attempts failed: retry after delay_ms or the backoff",
            {"delay_ms": {**COUNT, "maximum": limits.visibility_timeout_ms_max}},
            [],
        ),
        ("POST", QUEUE_PATH + "/extend"): _settle(
            "Keep the leases ms longer from now",
            {"ms": {"type": "integer", "minimum": 1, "maximum": limits.visibility_timeout_ms_max}},
            ["ms"],
        ),
        ("POST", QUEUE_PATH + "/discard"): _settle(
            "Dead at once, copied to the dead-letter topic", {}, []
        ),
        ("GET", QUEUE_PATH + "/trace"): {
            "summary": "A record's transitions in the status log",
            "parameters": [
                {"name": "partition", "in": "query", "required": True, "schema": COUNT},
                {"name": "offset", "in": "query", "required": True, "schema": COUNT},
            ],
            "responses": {
                "200": _ok(
                    {
                        "type": "object",
                        "properties": {
                            "transitions": {"type": "array", "items": {"type": "object"}}
                        },
                    }
                )
            },
        },
        ("POST", QUEUE_PATH + "/redrive"): {
            "summary": (
                "Put dead records back to work (all, those named in records, or up to limit); "
                "records that are not dead are left as they are; idempotent"
            ),
            "requestBody": _json_body(
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "limit": {"type": "integer", "minimum": 1},
                        "records": {
                            "type": "array",
                            "maxItems": limits.redrive_records_max,
                            "items": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["partition", "offset"],
                                "properties": {
                                    "partition": {"type": "integer", "minimum": 0},
                                    "offset": {"type": "integer", "minimum": 0},
                                },
                            },
                        },
                    },
                },
                required=False,
            ),
            "responses": {"200": _ok({"type": "object", "properties": {"redriven": COUNT}})},
        },
    }
)

TIMER_IN = {
    "type": "object",
    "additionalProperties": False,
    "required": ["topic"],
    "properties": {
        "topic": NAME,
        **{
            name: schema
            for name, schema in RECORD_IN["properties"].items()  # type: ignore[attr-defined]
            if name != "idempotency_key"
        },
        "at": {"type": "integer", "minimum": 0, "description": "Due time, ms since the epoch"},
        "delay_ms": {"type": "integer", "minimum": 0},
        "timer_id": TIMER_ID,
    },
}
TIMER_OUT = {
    "type": "object",
    "properties": {
        "timer_id": {"type": "string"},
        "state": {"type": "string", "enum": ["pending", "fired", "cancelled"]},
        "topic": {"type": "string"},
        "due_ms": {"type": "integer"},
        "partition": COUNT,
        "offset": COUNT,
        "fired_at_ms": {"type": "integer"},
        "cancelled_at_ms": {"type": "integer"},
    },
}
OPERATIONS.update(
    {
        ("POST", "/v1/timers"): {
            "summary": 'Schedule a timer, or many ({"timers": [...]}); answered once durable',
            "requestBody": _json_body(
                {
                    "oneOf": [
                        TIMER_IN,
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["timers"],
                            "properties": {
                                "timers": {
                                    "type": "array",
                                    "items": TIMER_IN,
                                    "maxItems": limits.schedule_timers_max,
                                }
                            },
                        },
                    ]
                }
            ),
            "responses": {
                "200": _ok(
                    {
                        "type": "object",
                        "properties": {
                            "timer_id": {"type": "string"},
                            "timer_ids": {"type": "array", "items": {"type": "string"}},
                        },
                    }
                )
            },
        },
        ("GET", "/v1/timers/{timer}"): {
            "summary": "A timer's state: pending, fired (where) or cancelled",
            "responses": {"200": _ok(TIMER_OUT)},
        },
        ("DELETE", "/v1/timers/{timer}"): {
            "summary": "Cancel a pending timer (404 if it fired, was cancelled or is unknown)",
            "responses": {"200": _ok({"type": "object"})},
        },
    }
)

STAGED_ID = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,200}$"}
STAGED_PATH = "/v1/topics/{topic}/staged/{writer}/{seq}"
OPERATIONS.update(
    {
        ("PUT", STAGED_PATH + "/{part}/{chunk}"): {
            "summary": "Stage records for a publish (durable; nothing is readable until then)",
            "parameters": [
                _query("partition", COUNT, "Every record goes to this partition (default: by key)")
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": RECORDS_JSON,
                    "application/vnd.brook.batch": BINARY,
                },
            },
            "responses": {
                "200": _ok(
                    {
                        "type": "object",
                        "description": "staged is false when seq was published already",
                        "properties": {"staged": {"type": "boolean"}},
                    }
                )
            },
        },
        ("POST", STAGED_PATH + "/publish"): {
            "summary": "Publish what was staged for seq, exactly once; answered once durable",
            "requestBody": _json_body(
                {
                    "type": "object",
                    "required": ["parts"],
                    "additionalProperties": False,
                    "properties": {
                        "parts": {
                            "type": "object",
                            "description": "part id -> how many chunks it staged",
                            "additionalProperties": COUNT,
                        }
                    },
                }
            ),
            "responses": {
                "200": _ok(
                    {
                        "type": "object",
                        "properties": {
                            "seq": COUNT,
                            "records": {"type": "integer", "nullable": True},
                            "replayed": {"type": "boolean"},
                        },
                    }
                )
            },
        },
        ("DELETE", STAGED_PATH): {
            "summary": "Drop what was staged for seq (false if it was published)",
            "responses": {
                "200": _ok({"type": "object", "properties": {"dropped": {"type": "boolean"}}})
            },
        },
    }
)


def document(router: Router, with_keys: bool) -> dict[str, Any]:
    """The OpenAPI 3.0 description of every route `router` serves."""
    paths: dict[str, dict[str, Any]] = {}
    for method, template, route in router.routes():
        operation = dict(OPERATIONS[(method, template)])
        parameters = [
            {
                "name": name,
                "in": "path",
                "required": True,
                "schema": TIMER_ID if name == "timer" else NAME,
            }
            for name in ("topic", "group", "timer")
            if "{" + name + "}" in template
        ] + [
            {
                "name": name,
                "in": "path",
                "required": True,
                "schema": STAGED_ID if name in ("writer", "part") else COUNT,
            }
            for name in ("writer", "seq", "part", "chunk")
            if "{" + name + "}" in template
        ]
        operation["parameters"] = parameters + operation.get("parameters", [])
        responses = dict(operation["responses"])
        responses["default"] = {
            "description": "An error",
            "content": {"application/json": {"schema": ERROR}},
        }
        operation["responses"] = responses
        if with_keys and route.scope is not None:
            operation["security"] = [{"bearer": []}]
            operation["description"] = f"Needs an API key with the {route.scope!r} scope."
        paths.setdefault(template, {})[method.lower()] = operation
    out: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "Brook", "version": brook.__version__},
        "paths": paths,
    }
    if with_keys:
        out["components"] = {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}
    return out
