"""Records and errors as JSON on the wire (docs/PROTOCOL.md). Pure: no I/O.

Values, keys and header values are bytes. In requests each may be given as UTF-8
text (`value`, `key`, `headers`) or base64 (`value_b64`, `key_b64`,
`headers_b64`). Responses always carry the base64 forms, and the text forms too
when the bytes are valid UTF-8.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from typing import Any

import msgspec

from brook import validate
from brook.codec.batch import ClientBatches, Columns
from brook.errors import BadRequest, BrookError
from brook.records import Record, TopicInfo

_json_decode = msgspec.json.Decoder().decode
json_encode = msgspec.json.Encoder().encode


JSON_TYPE = "application/json"
BATCH_TYPE = "application/vnd.brook.batch"
"""The binary batch format's media type (docs/PROTOCOL.md)."""


def parse_json(body: bytes) -> Any:
    """The request body as JSON; BadRequest when it is not."""
    try:
        return _json_decode(body)
    except msgspec.DecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None


def _b64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise BadRequest(f"{what} must be a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(f"{what} is not valid base64") from None


def _text(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise BadRequest(f"{what} must be a string")
    return text.encode()


def _field(item: dict[str, Any], name: str, index: int) -> bytes | None:
    text, b64 = item.get(name), item.get(f"{name}_b64")
    if text is not None and b64 is not None:
        raise BadRequest(f"record {index}: give {name} or {name}_b64, not both")
    if b64 is not None:
        return _b64(b64, f"record {index}: {name}_b64")
    if text is not None:
        return _text(text, f"record {index}: {name}")
    return None


def _headers(item: dict[str, Any], index: int) -> dict[str, bytes] | None:
    out: dict[str, bytes] = {}
    for name, decode in (("headers", _text), ("headers_b64", _b64)):
        given = item.get(name)
        if given is None:
            continue
        if not isinstance(given, dict):
            raise BadRequest(f"record {index}: {name} must be an object of strings")
        for header, value in given.items():
            out[header] = decode(value, f"record {index}: {name}.{header}")
    return out or None


RECORD_BODY_FIELDS = frozenset({"value", "value_b64", "key", "key_b64", "headers", "headers_b64"})
"""A record's value, key and headers as JSON (text or base64 forms)."""
_RECORD_FIELDS = RECORD_BODY_FIELDS | {"idempotency_key"}


def records_from_json(document: Any) -> Columns:
    """`{"records": [...]}` as Columns to append; BadRequest when malformed, RecordTooLarge
    when a record or the whole is too large."""
    if not isinstance(document, dict) or not isinstance(document.get("records"), list):
        raise BadRequest('the body must be {"records": [...]}')
    records: list[Record] = []
    keys: list[bytes | None] = []
    for index, item in enumerate(document["records"]):
        if not isinstance(item, dict):
            raise BadRequest(f"record {index} must be an object")
        unknown = set(item) - _RECORD_FIELDS
        if unknown:
            raise BadRequest(f"record {index}: unknown fields {sorted(unknown)}")
        records.append(one_record_from_json(item, index))
        keys.append(validate.idempotency_key(item.get("idempotency_key")))
    return validate.sized(Columns.from_records(records, keys))


def one_record_from_json(item: dict[str, Any], index: int) -> Record:
    """The value, key and headers of one JSON item (text or _b64 forms), checked."""
    value = _field(item, "value", index)
    if value is None:
        raise BadRequest(f"record {index} has no value or value_b64")
    record, _ = validate.record(value, _field(item, "key", index), _headers(item, index))
    return record


def _with_text(out: dict[str, Any], name: str, data: bytes) -> None:
    out[f"{name}_b64"] = base64.b64encode(data).decode()
    with contextlib.suppress(UnicodeDecodeError):  # the text form only when it is text
        out[name] = data.decode()


def record_to_json(record: Record) -> dict[str, Any]:
    out: dict[str, Any] = {
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
    }
    if record.key is not None:
        _with_text(out, "key", record.key)
    _with_text(out, "value", record.value)
    headers = record.headers or {}
    out["headers_b64"] = {name: base64.b64encode(v).decode() for name, v in headers.items()}
    with contextlib.suppress(UnicodeDecodeError):
        out["headers"] = {name: v.decode() for name, v in headers.items()}
    return out


def topic_to_json(info: TopicInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "partitions": info.partitions,
        "retention_ms": info.retention_ms,
        "retention_bytes": info.retention_bytes,
        "compaction": info.compaction,
        "end_offsets": {str(p): o for p, o in info.end_offsets.items()},
    }


def error_to_json(error: BrookError) -> bytes:
    return json_encode({"error": {"code": error.code, "message": error.message}})


def records_from_batches(body: bytes) -> Columns | ClientBatches:
    """The records of a binary batch body, checked (validate.batch_body)."""
    return validate.batch_body(body)
