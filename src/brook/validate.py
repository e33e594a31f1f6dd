"""Checks of user input, turning anything malformed into a clear BadRequest."""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate
from operator import add
from typing import Any

from brook import event_headers, limits, names, scheduling
from brook.codec.batch import ClientBatches, Columns, read_client_batches
from brook.errors import BadRequest, CorruptData, InvalidName, RecordTooLarge
from brook.records import Record

DEFAULT = limits.record_bytes_max_default
"""What record sizes are checked against when the caller names no broker's own limit."""


def topic_name(name: Any, internal: bool = False) -> str:
    """A valid topic name; names starting with '__' are reserved for Brook's own topics."""
    if not isinstance(name, str) or not names.NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidName(f"invalid name {name!r}: use 1 to 200 of A-Z a-z 0-9 . _ -")
    if name.startswith("__") and not internal:
        raise InvalidName(f"invalid name {name!r}: names starting with '__' are reserved")
    return name


group_name = topic_name


def _bytes(value: Any, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise BadRequest(f"{what} must be bytes, not {type(value).__name__}")


def record(
    value: Any, key: Any = None, headers: Any = None, *, record_bytes_max: int = DEFAULT
) -> tuple[Record, int]:
    """A Record ready to append, and its size in bytes; raises BadRequest or RecordTooLarge."""
    value = _bytes(value, "value")
    key = None if key is None else _bytes(key, "key")
    size = len(value) + (len(key) if key else 0)
    if headers is not None:
        if not isinstance(headers, Mapping):
            raise BadRequest(
                f"headers must be a dict of str to bytes, not {type(headers).__name__}"
            )
        clean = {}
        for name, header in headers.items():
            if not isinstance(name, str):
                raise BadRequest(f"header names must be str, not {type(name).__name__}")
            clean[name] = _bytes(header, f"header {name!r}")
            size += len(name.encode()) + len(clean[name])
        scheduling.check(clean)
        event_headers.check(clean)
        headers = clean or None
    _check_record(size, record_bytes_max)
    return Record(value, key, headers), size


def one(
    value: Any,
    key: Any = None,
    headers: Any = None,
    idempotency: Any = None,
    *,
    record_bytes_max: int = DEFAULT,
) -> Columns:
    """One record to append, checked, as Columns; raises BadRequest or RecordTooLarge."""
    checked, size = record(value, key, headers, record_bytes_max=record_bytes_max)
    idem = idempotency_key(idempotency)
    return Columns(
        [checked.value],
        None if checked.key is None else [checked.key],
        None if checked.headers is None else [checked.headers],
        None if idem is None else [idem],
        size,
    )


def records(
    items: Iterable[Any],
    idempotency_keys: Sequence[Any] | None = None,
    *,
    record_bytes_max: int = DEFAULT,
) -> Columns:
    """Records for append_many as columns, checked, with their idempotency keys
    (one per record, or None); raises BadRequest or RecordTooLarge.

    The common case (bytes values, no keys or headers) is checked column by
    column without building new objects; anything else record by record.
    """
    listed = items if isinstance(items, list | tuple) else list(items)
    columns = _records(listed, record_bytes_max)
    if idempotency_keys is not None:
        if len(idempotency_keys) != len(columns):
            raise BadRequest("idempotency_keys must have one entry per record")
        keys = [idempotency_key(k) for k in idempotency_keys]
        columns.idempotency = None if keys.count(None) == len(keys) else keys
    return columns


def _records(items: list[Any] | tuple[Any, ...], record_bytes_max: int) -> Columns:
    try:
        values = [item.value for item in items]
        count = len(values)
        plain = (
            set(map(type, values)) <= {bytes}
            and [item.key for item in items].count(None) == count
            and [item.headers for item in items].count(None) == count
        )
    except AttributeError:
        plain = False
    if not plain:
        return _records_one_by_one(items, record_bytes_max)
    try:
        ends = array("I", accumulate(map(len, values), initial=0))
    except OverflowError:
        ends = None
    size = ends[-1] if ends is not None else limits.append_bytes_max + 1
    _check_append_size(size)
    if size > record_bytes_max:
        _check_record(max(map(len, values)), record_bytes_max)
    columns = Columns(values, size_bytes=size)
    columns.value_ends = ends
    return columns


def sized(columns: Columns, *, record_bytes_max: int = DEFAULT) -> Columns:
    """Columns of records whose types are already sure (decoded from a batch, or
    checked one by one from JSON), checked for size like any append; sets their size.

    Raises RecordTooLarge or BadRequest (an idempotency key out of bounds).
    """
    sizes = list(map(len, columns.values))
    if columns.keys is not None:
        sizes = list(map(add, sizes, [len(k) if k else 0 for k in columns.keys]))
    if columns.headers is not None:
        for i, headers in enumerate(columns.headers):
            if headers:
                sizes[i] += sum(len(name.encode()) + len(v) for name, v in headers.items())
                scheduling.check(headers)
                event_headers.check(headers)
    columns.bytes = sum(sizes)
    _check_sizes(max(sizes, default=0), columns.bytes, record_bytes_max)
    if columns.idempotency is not None:
        for key in columns.idempotency:
            idempotency_key(key)
    return columns


def batch_body(body: bytes, *, record_bytes_max: int = DEFAULT) -> Columns | ClientBatches:
    """The records of a binary batch body (docs/PROTOCOL.md): whole, checksummed batches.

    Batches of values and keys only are kept as they are, to be appended
    without decoding; others are decoded into Columns. Offsets and timestamps
    inside are ignored (the broker assigns them); every record is checked like
    any other append. BadRequest when the body does not hold together,
    RecordTooLarge when a record or the whole is too large.
    """
    try:
        batches = read_client_batches(body)
        if batches.plain:
            return client_batches(batches, record_bytes_max=record_bytes_max)
        return sized(batches.columns(), record_bytes_max=record_bytes_max)
    except CorruptData as exc:
        raise BadRequest(f"the binary batch is malformed: {exc.message}") from None


def client_batches(batches: ClientBatches, *, record_bytes_max: int = DEFAULT) -> ClientBatches:
    """A client's plain batches, checked for size; raises RecordTooLarge."""
    _check_sizes(batches.largest, batches.bytes, record_bytes_max)
    return batches


def _check_sizes(largest: int, total: int, record_bytes_max: int) -> None:
    _check_record(largest, record_bytes_max)
    _check_append_size(total)


def _check_record(size: int, record_bytes_max: int) -> None:
    if size > record_bytes_max:
        raise RecordTooLarge(
            f"record of {size} bytes exceeds record_bytes_max ({record_bytes_max})"
        )


def _check_append_size(size: int) -> None:
    if size > limits.append_bytes_max:
        raise RecordTooLarge(
            f"append_many of more than {limits.append_bytes_max} bytes (append_bytes_max): split it into smaller calls"
        )


def _records_one_by_one(items: Iterable[Any], record_bytes_max: int) -> Columns:
    prepared: list[Record] = []
    size = 0
    for item in items:
        if not isinstance(item, Record):
            raise BadRequest(f"append_many takes brook.Record items, not {type(item).__name__}")
        checked, item_size = record(
            item.value, item.key, item.headers, record_bytes_max=record_bytes_max
        )
        prepared.append(checked)
        size += item_size
    _check_append_size(size)
    columns = Columns.from_records(prepared)
    columns.bytes = size
    return columns


def idempotency_key(key: Any) -> bytes | None:
    if key is None:
        return None
    clean = key.encode() if isinstance(key, str) else _bytes(key, "idempotency_key")
    if not 0 < len(clean) <= limits.idempotency_key_bytes_max:
        raise BadRequest(f"idempotency_key must be 1 to {limits.idempotency_key_bytes_max} bytes")
    return clean


def whole(value: Any, what: str, low: int = 0, high: int | None = None) -> int:
    """An int within [low, high]; bools and other types are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{what} must be an integer, not {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise BadRequest(f"{what} must be {bound}, not {value}")
    return value


def optional_whole(value: Any, what: str, low: int = 0, high: int | None = None) -> int | None:
    return None if value is None else whole(value, what, low, high)


def seconds(value: Any, what: str) -> float:
    """A wait in seconds: a number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise BadRequest(f"{what} must be a number of seconds >= 0, not {value!r}")
    return float(value)


def cancelled(records: Any, key: Any) -> tuple[list[tuple[int, int]] | None, bytes | None]:
    """What a cancel names: (partition, offset) pairs, or a key (bytes or text); exactly one."""
    if (records is None) == (key is None):
        raise BadRequest("name the records to cancel (records=) or their key (key=), one of them")
    if key is not None and not isinstance(key, str | bytes):
        raise BadRequest(f"key must be bytes or str, not {type(key).__name__}")
    return positions(records), key.encode() if isinstance(key, str) else key


def text(value: Any, what: str, chars_max: int) -> str:
    """A string of at most `chars_max` characters; BadRequest otherwise."""
    if not isinstance(value, str):
        raise BadRequest(f"{what} must be a string, not {value!r}"[:200])
    if len(value) > chars_max:
        raise BadRequest(f"{what} is at most {chars_max} characters, not {len(value)}")
    return value


def reason(text: Any) -> str:
    """Why a record was nacked or discarded: a string, cut at queue_reason_chars_max."""
    if not isinstance(text, str):
        raise BadRequest(f"reason must be a string, not {text!r}")
    return text[: limits.queue_reason_chars_max]


def receipts(jobs: Any) -> list[str]:
    """The receipts of a Job, a receipt string, or a list of either."""
    items = jobs if isinstance(jobs, list | tuple) else [jobs]
    out = []
    for item in items:
        receipt = getattr(item, "receipt", item)
        if not isinstance(receipt, str):
            raise BadRequest(f"expected a Job or a receipt string, not {item!r}")
        if not names.RECEIPT.fullmatch(receipt):
            shown = receipt if len(receipt) <= 60 else receipt[:60] + "..."
            raise BadRequest(f"{shown!r} is not a receipt: give the receipt a lease returned")
        out.append(receipt)
    return out


def results(given: Any, count: int) -> list[bytes | None]:
    """One result per settled job (bytes or None), each within job_result_bytes_max."""
    if isinstance(given, bytes | str) or not isinstance(given, Sequence):
        raise BadRequest("results must be a list with one entry (bytes or None) per job")
    if len(given) != count:
        raise BadRequest(f"results has {len(given)} entries for {count} jobs: give one per job")
    out: list[bytes | None] = []
    for value in given:
        if value is None:
            out.append(None)
            continue
        data = _bytes(value, "a result")
        if len(data) > limits.job_result_bytes_max:
            raise RecordTooLarge(
                f"a result of {len(data)} bytes exceeds job_result_bytes_max "
                f"({limits.job_result_bytes_max})"
            )
        out.append(data)
    return out


def positions(records: Any) -> list[tuple[int, int]] | None:
    """(partition, offset) pairs, at most redrive_records_max of them; None stays None."""
    if records is None:
        return None
    if isinstance(records, str | bytes | dict) or not isinstance(records, Iterable):
        raise BadRequest("records must be a list of [partition, offset] pairs")
    out = []
    for item in records:
        if isinstance(item, dict):
            item = (item.get("partition"), item.get("offset"))
        if not isinstance(item, list | tuple) or len(item) != 2:
            raise BadRequest(f"each record is a [partition, offset] pair, not {item!r}")
        out.append((whole(item[0], "partition"), whole(item[1], "offset")))
        if len(out) > limits.redrive_records_max:
            raise BadRequest(f"at most {limits.redrive_records_max} records per call")
    return out


def replay_from(
    topic: str | None, since_ms: Any, partition: Any, offset: Any
) -> tuple[int | None, int | None, int | None]:
    """Where a replay starts: a time, or an offset of a topic (of one partition, or
    of each). Returns (since_ms, partition, offset), checked."""
    if (since_ms is None) == (offset is None):
        raise BadRequest(
            "a replay starts at since_ms (records appended from that time) or at an "
            "offset of one topic: give one of them"
        )
    if offset is not None and topic is None:
        raise BadRequest("a replay from an offset needs the topic: offsets are a topic's own")
    if partition is not None and offset is None:
        raise BadRequest("partition goes with offset (since_ms takes every partition)")
    return (
        optional_whole(since_ms, "since_ms"),
        optional_whole(partition, "partition"),
        optional_whole(offset, "offset"),
    )


def webhook_id(value: Any) -> str:
    """A delivered message's webhook-id: Brook's own (topic:partition:offset), or the
    sender's event id a record carried (event_headers.EVENT_ID)."""
    if not isinstance(value, str) or not (
        re.fullmatch(names.MESSAGE_ID_PATTERN, value) or event_headers.is_event_id(value)
    ):
        raise BadRequest(
            f"{str(value)[:80]!r} is not a webhook-id: Brook sends topic:partition:offset, "
            "or the record's brook.event-id (a test request's id names no record)"
        )
    return value


def tenant(value: Any) -> str:
    """A tenant's name: 1 to topic_name_chars_max of A-Z a-z 0-9 . _ -, not `__...`."""
    if not isinstance(value, str) or not names.USER_NAME.fullmatch(value):
        raise BadRequest(
            f"invalid tenant {str(value)[:80]!r}: 1 to {limits.topic_name_chars_max} of "
            "A-Z a-z 0-9 . _ - (not starting with '__')"
        )
    return value


def event_type(value: Any) -> str:
    """An event type's name (`invoice.paid`): 1 to event_type_chars_max of A-Z a-z 0-9 . _ -."""
    if not isinstance(value, str) or not event_headers.is_event_type(value):
        raise BadRequest(
            f"invalid event type {str(value)[:80]!r}: 1 to {limits.event_type_chars_max} of "
            "A-Z a-z 0-9 . _ -"
        )
    return value


def timer_id(value: Any) -> str:
    """A timer's id: 1 to timer_id_chars_max of A-Z a-z 0-9 . _ : -."""
    if not isinstance(value, str) or not names.ID.fullmatch(value):
        raise BadRequest(
            f"invalid timer_id {value!r}: use 1 to {limits.timer_id_chars_max} of "
            "A-Z a-z 0-9 . _ : -"
        )
    return value


def staging_id(value: object, what: str) -> str:
    """A staged write's writer or part id."""
    if not isinstance(value, str) or not names.ID.fullmatch(value):
        raise BadRequest(f"{what} must be 1 to 200 of A-Z a-z 0-9 . _ : -, not {value!r}")
    return value


def staging_seq(value: object) -> int:
    """A staged write's publish number."""
    return whole(value, "seq", 0, limits.staging_seq_max)


def staged_parts(parts: object) -> dict[str, int]:
    """A publish's parts: {part id: chunk count}, as the tasks reported them."""
    if not isinstance(parts, dict):
        raise BadRequest("parts must be an object of part id -> number of chunks")
    out = {}
    for part, chunks in parts.items():
        out[staging_id(part, "a part id")] = whole(
            chunks, f"the chunk count of part {part}", 0, limits.staging_chunks_per_part_max
        )
    return out
