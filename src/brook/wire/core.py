"""The HTTP API's JSON shapes, the part every resource shares: media types, the
field types, `In` and `Out`, records (the hot path: compiled, brook/compiled.py),
health and errors, and how requests and answers are decoded and encoded. Pure: no I/O."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeVar

import msgspec
from msgspec import Meta

from brook import limits, validate
from brook.codec import encode_batch as encode_batch  # binary batches: a wire format
from brook.codec.batch import ClientBatches as ClientBatches
from brook.codec.batch import Columns as Columns
from brook.duplicate_keys import has_duplicates
from brook.errors import BadRequest, BrookError
from brook.records import (
    Ack,
    Record,
)

JSON_TYPE = "application/json"
RAW_TYPE = "application/octet-stream"
"""A POST of records with this type is one record whose value is the body, as it is."""
BATCH_TYPE = "application/vnd.brook.batch"
"""The binary batch format's media type (docs/PROTOCOL.md)."""

PARTITION_KEY_PATTERN = "^(0|[1-9][0-9]{0,17})$"
"""A partition number as a JSON object's key: decimal digits, no leading zero (within the
63 bits an offset has; a partition the topic lacks is a 404)."""
Count = Annotated[int, Meta(ge=0, le=limits.whole_max)]
Offset = Annotated[int, Meta(ge=0, le=limits.whole_max, description="An offset in a partition")]
Positive = Annotated[int, Meta(ge=1, le=limits.whole_max)]
Millis = Annotated[int, Meta(ge=0, le=limits.whole_max, description="Milliseconds")]
Visibility = Annotated[int, Meta(ge=1, le=limits.visibility_timeout_ms_max)]
Reason = Annotated[str, Meta(description=f"Kept up to {limits.queue_reason_chars_max} characters")]


def given_fields(struct: msgspec.Struct) -> dict[str, Any]:
    return {k: v for k, v in msgspec.structs.asdict(struct).items() if v is not None}


InT = TypeVar("InT", bound="In")
OutT = TypeVar("OutT", bound="Out")


class In(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """A request body: unknown fields are refused; fields left out take their defaults.

    For an operation the table answers with a facade call (brook/operations.py), a body
    is the call's keyword arguments: `arguments` on the server, `of_arguments` on the
    client, one the inverse of the other."""

    shape: ClassVar[str] = ""
    """The body's shape in brief, added to an error about the body as a whole."""

    def arguments(self) -> dict[str, Any]:
        """The facade call's keyword arguments this body gives: its fields, those not
        given (null) left out, so the call's own defaults hold."""
        return given_fields(self)

    @classmethod
    def of_arguments(cls: type[InT], **arguments: Any) -> InT:
        """The body a client sends for these call arguments (None: not given), checked
        as the server checks it (BadRequest)."""
        return request(cls, **{k: v for k, v in arguments.items() if v is not None})

    def resend_safe(self) -> bool | None:
        """Whether sending this body twice does no harm, when what it carries decides
        (a unique record without replace); None: as the operation's row says."""
        return None


class Out(msgspec.Struct, kw_only=True):
    """An answer's body: clients ignore fields they do not know (the API may grow).

    For an operation the table answers with a facade call, `of` makes the answer from
    what the call returned (on the server) and `returned` gives it back (on the client)."""

    @classmethod
    def of(cls: type[OutT], result: Any) -> OutT:
        """The answer to a call that returned `result`: by default, `result`'s fields."""
        return msgspec.convert(result, cls, from_attributes=True)

    def returned(self) -> Any:
        """What the client's call returns: by default, the answer itself."""
        return self


class Listing(Out):
    """An answer that is a list of a public type under one field (`{"errors": [...]}`):
    made by `listing`, so an operation answering a list needs no shape of its own."""

    @classmethod
    def of(cls, items: Any) -> Any:
        return cls(**{cls.__struct_fields__[0]: list(items)})

    def returned(self) -> Any:
        return getattr(self, self.__struct_fields__[0])


def listing(name: str, field: str, item: Any) -> type[Listing]:
    """The answer shape `name`: `{field: [item, ...]}` (the OpenAPI document names it)."""
    shape: Any = msgspec.defstruct(
        name, [(field, list[item])], bases=(Listing,), kw_only=True, module=__name__
    )
    return shape  # type: ignore[no-any-return]


# ---------------------------------------------------------------- records


BASE64_PATTERN = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
"""Standard base64 with its padding: what a `..._b64` field takes."""


class RecordFields(In):
    """A record's value, key and headers, each as text or as base64."""

    one_at_most: ClassVar[tuple[tuple[str, str], ...]] = (
        ("value", "value_b64"),
        ("key", "key_b64"),
        ("headers", "headers_b64"),
    )
    """Pairs of fields of which a request gives one at most (null is not given); the
    OpenAPI document states the same rules from here."""
    one_at_least: ClassVar[tuple[tuple[str, str], ...]] = (("value", "value_b64"),)
    """Pairs of fields of which a request gives one at least."""

    value: str | None = None
    value_b64: bytes | None = None
    key: str | None = None
    key_b64: bytes | None = None
    headers: dict[str, str] | None = None
    headers_b64: dict[str, bytes] | None = None

    def __post_init__(self) -> None:
        for first, second in self.one_at_least:
            if getattr(self, first) is None and getattr(self, second) is None:
                raise ValueError(f"a record needs {first} or {second}")
        for first, second in self.one_at_most:
            if getattr(self, first) is not None and getattr(self, second) is not None:
                raise ValueError(f"give {first} or {second}, not both")

    def record_arguments(self) -> dict[str, Any]:
        """The record's value, key and headers as a call's arguments."""
        record = self.record()
        return {"value": record.value, "key": record.key, "headers": record.headers}

    @staticmethod
    def record_fields(arguments: dict[str, Any]) -> dict[str, Any]:
        """A call's value, key and headers (checked as an embedded call checks them) as a
        body's fields, in base64 so that any bytes go; the other arguments as they are."""
        fields = {k: v for k, v in arguments.items() if v is not None}
        value, key, headers = (fields.pop(name, None) for name in ("value", "key", "headers"))
        record, _ = validate.record(
            b"" if value is None else value,
            key,
            headers,
            record_bytes_max=limits.record_bytes_max_ceiling,
        )
        fields["value_b64"] = record.value
        if record.key is not None:
            fields["key_b64"] = record.key
        if record.headers:
            fields["headers_b64"] = record.headers
        return fields

    def record(self) -> Record:
        """The record, checked for size (RecordTooLarge)."""
        # Text from msgspec always encodes: it refuses lone surrogates ("\ud800").
        value = self.value_b64 if self.value is None else self.value.encode()
        key = self.key_b64 if self.key is None else self.key.encode()
        headers: dict[str, bytes] | None = self.headers_b64
        if self.headers is not None:
            headers = {name: text.encode() for name, text in self.headers.items()}
        record, _ = validate.record(value, key, headers or None)
        return record


class RecordIn(RecordFields):
    idempotency_key: (
        Annotated[str, Meta(min_length=1, max_length=limits.idempotency_key_bytes_max)] | None
    ) = None


class RecordsIn(In):
    """POST /v1/topics/{topic}/records, PUT .../staged/...: records to append."""

    shape: ClassVar[str] = (
        'the body is {"records": [{"value": "..."}, ...]} (or, as application/octet-stream, '
        "one record's value as it is)"
    )
    records: list[RecordIn]

    def keys_held(self) -> int:
        """How many keys a body needs at least to decode to this (for duplicate_keys):
        `records`, each record's fields that are not null, and every header."""
        count = 1
        astuple = msgspec.structs.astuple
        for record in self.records:
            fields = astuple(record)
            count += len(fields) - fields.count(None)
            if record.headers:
                count += len(record.headers)
            if record.headers_b64:
                count += len(record.headers_b64)
        return count

    def columns(self, record_bytes_max: int = limits.record_bytes_max_default) -> Columns:
        """The records as Columns to append, checked (RecordTooLarge, BadRequest)."""
        records = [item.record() for item in self.records]
        keys = [validate.idempotency_key(item.idempotency_key) for item in self.records]
        columns = Columns.from_records(records, keys)
        return validate.sized(columns, record_bytes_max=record_bytes_max)


class StagedRecordsIn(RecordsIn):
    """PUT .../staged/...: records to stage; no idempotency keys (the publish of a seq
    is exactly once already)."""

    records: list[RecordFields]  # type: ignore[assignment]

    def columns(self, record_bytes_max: int = limits.record_bytes_max_default) -> Columns:
        columns = Columns.from_records([item.record() for item in self.records])
        return validate.sized(columns, record_bytes_max=record_bytes_max)


class RecordOut(Out, omit_defaults=True):
    partition: Count
    offset: Offset
    timestamp: int
    value_b64: bytes
    headers_b64: dict[str, bytes]
    value: str | None = None
    key_b64: bytes | None = None
    key: str | None = None
    headers: dict[str, str] | None = None

    @classmethod
    def of(cls, record: Record) -> RecordOut:
        headers = record.headers or {}
        return cls(
            partition=record.partition,
            offset=record.offset,
            timestamp=record.timestamp,
            value_b64=record.value,
            value=text_of(record.value),
            key_b64=record.key,
            key=None if record.key is None else text_of(record.key),
            headers_b64=headers,
            headers=_texts(headers),
        )

    def record(self, topic: str) -> Record:
        return Record(
            self.value_b64,
            self.key_b64,
            self.headers_b64 or None,
            topic,
            self.partition,
            self.offset,
            self.timestamp,
        )


def text_of(data: bytes) -> str | None:
    """`data` as text when it is valid UTF-8, else None (answers carry base64 too)."""
    try:
        return data.decode()
    except UnicodeDecodeError:  # the text form only when it is text
        return None


def _texts(headers: dict[str, bytes]) -> dict[str, str] | None:
    try:
        return {name: value.decode() for name, value in headers.items()}
    except UnicodeDecodeError:
        return None


class Acks(Out):
    acks: list[Ack]


class RecordPage(Out):
    records: list[RecordOut]
    next_offset: Offset


class Polled(Out):
    records: list[RecordOut]


# ---------------------------------------------------------------- health and errors


class Failing(Out, omit_defaults=True):
    loop: str
    task: str | None
    error: str
    since_ms: int
    failures: int
    subject: str | None = None
    """Whose work fails (an endpoint, a queue group), in `isolated`."""


class Health(Out, omit_defaults=True):
    status: Literal["ok", "failing"]
    failing: list[Failing] | None = None
    """Background loops failing: the broker does not serve as it should (503)."""
    isolated: list[Failing] | None = None
    """Work for single endpoints or queue groups failing now, the first
    HEALTH_ISOLATED_MAX of them: theirs alone, the broker serves the others (200)."""
    isolated_count: int = 0


class ErrorDetail(Out):
    code: str
    message: str


class ErrorOut(Out):
    error: ErrorDetail


# ---------------------------------------------------------------- encoding

encode = msgspec.json.Encoder().encode

T = TypeVar("T")


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    return decoder


def decode_request(body: bytes, kind: type[T], empty_ok: bool = False) -> T:
    """A request body as `kind`; BadRequest saying what is wrong and where.

    With `empty_ok`, an empty body is `kind()` (every field left out)."""
    if empty_ok and not body.strip():
        return kind()
    try:
        try:
            decoded: T = _decoder(kind).decode(body)
        except msgspec.ValidationError as exc:
            if "got `float`" not in str(exc):
                raise
            decoded = _decoder(kind).decode(_integral_floats_as_ints(body))
    except msgspec.ValidationError as exc:
        whole = " - at `$" not in str(exc)  # about the body itself, not a field inside it
        shape: str = getattr(kind, "shape", "")
        hint = f"; {shape}" if whole and shape else ""
        raise BadRequest(f"invalid body: {exc}{hint}") from None
    except msgspec.DecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise BadRequest("the body is not valid JSON: it is not UTF-8") from None
    except RecursionError:
        raise BadRequest("the body is not valid JSON: it is nested too deeply") from None
    if has_duplicates(body, decoded):
        raise BadRequest("invalid body: an object names the same field twice")
    return decoded


EXACT_FLOAT_MAX = 2**53
"""Past this a JSON number written with a fraction or exponent may not be the integer meant."""


def _integral_floats_as_ints(body: bytes) -> bytes:
    """The body with every number written as a whole float (`2.0`, `1e3`) written as an
    integer: JSON Schema's `integer` takes them (2020-12: a number with no fraction), so
    the API does too. Only the bodies first refused for a float go through this."""

    def whole(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer() and abs(value) <= EXACT_FLOAT_MAX:
            return int(value)
        if isinstance(value, list):
            return [whole(item) for item in value]
        if isinstance(value, dict):
            return {name: whole(item) for name, item in value.items()}
        return value

    return msgspec.json.encode(whole(msgspec.json.decode(body)))


def request(kind: type[T], **fields: Any) -> T:
    """A request body built from Python values (the clients' side), checked like the
    server checks it; BadRequest when a field does not fit."""
    try:
        return msgspec.convert(fields, kind)
    except msgspec.ValidationError as exc:
        raise BadRequest(str(exc)) from None


def decode_answer(body: bytes, kind: type[T]) -> T:
    """An answer's body as `kind` (the client's side); msgspec errors pass up as they are."""
    decoded: T = _decoder(kind).decode(body)
    return decoded


def error_body(error: BrookError) -> bytes:
    return encode(ErrorOut(error=ErrorDetail(code=error.code, message=error.message)))
