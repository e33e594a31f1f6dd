"""The client's side of the HTTP API, without I/O: calls in, requests out, responses parsed.

Each API method becomes a Call (what to send, how to read the answer, whether
resending it is safe); client/sync.py and client/aio.py only carry Calls over
HTTP. Appends and reads use the binary batch format (docs/PROTOCOL.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from brook import limits, names, validate, wire
from brook.codec import decode_records, encode_batch, scan_batches
from brook.codec.batch import Columns
from brook.errors import BadRequest, BrookError, CorruptData, from_code
from brook.models import (
    JobInfo,
    TimerInfo,
    TimerSpec,
)
from brook.operations import OPERATIONS, path_of
from brook.records import (
    Ack,
    Job,
    JoinContinuation,
    JoinInfo,
    JoinMember,
    JoinSpec,
    Published,
    Record,
)

BATCH_TYPE = wire.BATCH_TYPE
_json = msgspec.json.Decoder().decode
_answer = wire.decode_answer


RECORD_CEILING = limits.record_bytes_max_ceiling
"""A client checks records only against the most any broker may take: the server it
talks to applies its own record_bytes_max (413, RecordTooLarge)."""


class Call(NamedTuple):
    method: str
    path: str
    params: dict[str, Any]
    body: bytes | None
    headers: dict[str, str]
    parse: Callable[[int, dict[str, str], bytes], Any]
    retry_safe: bool
    """True when sending it twice does no harm (reads; appends whose records all carry idempotency keys)."""


def error_from(status: int, body: bytes) -> BrookError:
    try:
        error = _answer(body, wire.ErrorOut).error
        return from_code(error.code, error.message, status)
    except msgspec.DecodeError:
        text = body[:200].decode(errors="replace")
        return from_code("", f"HTTP {status}: {text}", status)


def _call(
    name: str,
    where: Mapping[str, str | int],
    params: dict[str, Any],
    body: bytes | None,
    headers: dict[str, str],
    parse: Callable[[int, dict[str, str], bytes], Any],
    retry_safe: bool | None = None,
) -> Call:
    """A call of operation `name` (brook/operations.py): its method and path from the
    table, its path parameters from `where`; resent after a lost answer when the table
    says it is safe, or when `retry_safe` says this call is (what it carries makes it)."""
    operation = OPERATIONS[name]
    safe = operation.retry_safe if retry_safe is None else retry_safe
    return Call(operation.method, path_of(name, **where), params, body, headers, parse, safe)


PATH_CHECKS: dict[str, Callable[[Any], Any]] = {
    "topic": validate.topic_name,
    "group": validate.group_name,
    "endpoint": validate.topic_name,
    "event_type": validate.event_type,
    "schedule": lambda name: _schedule_name(name)["schedule"],
    "message": validate.webhook_id,
}
"""How a client checks a path's parameters before sending (the errors an embedded call
gives, not a 404 from a path that leads nowhere)."""


def request(name: str, *path: str | int, **arguments: Any) -> Call:
    """The one generic call: operation `name`, whose row names a facade call
    (brook/operations.py), called as that method is. The path's parameters come first,
    in order; of the keyword arguments, those the row's query declares go in the query
    (None: left out), the rest make the body (`body.of_arguments`). Each is checked here
    as an embedded call checks it (InvalidName, BadRequest). The answer is read back by
    `answer.returned()`, or is the public type itself."""
    operation = OPERATIONS[name]
    names = [part[1:-1] for part in operation.path.split("/") if part.startswith("{")]
    where = dict(zip(names, path, strict=True))
    for part, value in where.items():
        PATH_CHECKS.get(part, _as_is)(value)
    params: dict[str, Any] = {}
    for param in operation.query:
        value = arguments.pop(param.name, None)
        if value is not None and param.kind == "whole":
            value = validate.whole(value, param.name, param.low, param.high)
        elif value is not None and param.name == "topic":
            value = validate.topic_name(value)
        elif value is not None and param.kind == "text":
            value = validate.text(value, param.name, limits.queue_reason_chars_max)
        elif value is not None and param.kind == "position":
            (place,) = validate.positions([value]) or [(0, 0)]
            value = f"{place[0]}:{place[1]}"
        if value is not None:
            params[param.name] = value
    body: bytes | None = None
    headers: dict[str, str] = {}
    safe = None
    if operation.body is not None:
        document = operation.body.of_arguments(**arguments)
        body, headers = _json_body(document)
        safe = document.resend_safe()
    elif any(v is not None for v in arguments.values()):
        raise TypeError(f"{name} takes no {', '.join(sorted(arguments))}")
    return _call(name, where, params, body, headers, _returned(operation.answer), safe)


def _as_is(value: Any) -> Any:
    return value


def _returned(shape: type[msgspec.Struct] | None) -> Callable[[int, dict[str, str], bytes], Any]:
    """How a generic call reads its answer."""
    if shape is None:
        return lambda status, headers, body: None
    if issubclass(shape, wire.Out):
        out: type[wire.Out] = shape
        return lambda status, headers, body: _answer(body, out).returned()
    return lambda status, headers, body: _answer(body, shape)


def _json_body(document: wire.In) -> tuple[bytes, dict[str, str]]:
    return wire.encode(document), {"content-type": wire.JSON_TYPE}


def _acks(status: int, headers: dict[str, str], body: bytes) -> list[Ack]:
    return _answer(body, wire.Acks).acks


# ---------------------------------------------------------------- topics


def end_offsets(topic: str) -> Call:
    return _call(
        "describe_topic",
        {"topic": topic},
        {},
        None,
        {},
        lambda s, h, b: _answer(b, wire.TopicOut).end_offsets,
    )


def start_offsets(topic: str) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> dict[int, int]:
        return _answer(body, wire.TopicDetail).start_offsets

    return _call("describe_topic", {"topic": topic}, {}, None, {}, parse)


# ---------------------------------------------------------------- records


def append_many(
    topic: str,
    records: Sequence[Record],
    idempotency_keys: Sequence[bytes | str | None] | None,
    partition: int | None = None,
) -> Call:
    """Records as one binary batch; checked here first, so bad input never leaves the client."""
    if partition is not None:
        validate.whole(partition, "partition")
    columns = validate.records(list(records), idempotency_keys, record_bytes_max=RECORD_CEILING)
    return _append(topic, columns, partition)


def append(
    topic: str,
    value: bytes,
    key: bytes | None,
    headers: dict[str, bytes] | None,
    idempotency_key: bytes | str | None,
) -> Call:
    columns = validate.one(value, key, headers, idempotency_key, record_bytes_max=RECORD_CEILING)
    return _append(topic, columns)


def _append(topic: str, columns: Columns, partition: int | None = None) -> Call:
    body = b"".join(encode_batch(0, 0, columns)) if len(columns) else b""
    safe = columns.idempotency is not None and None not in columns.idempotency
    return _call(
        "append",
        {"topic": topic},
        {} if partition is None else {"partition": str(partition)},
        body,
        {"content-type": BATCH_TYPE},
        _acks,
        retry_safe=safe,
    )


# ---------------------------------------------------------------- staged writes


def _staged(topic: str, writer: str, seq: int) -> dict[str, str | int]:
    """The path parameters of a staged write, checked."""
    validate.topic_name(topic)
    validate.staging_id(writer, "writer")
    return {"topic": topic, "writer": writer, "seq": validate.staging_seq(seq)}


def stage(
    topic: str,
    writer: str,
    seq: int,
    part: str,
    chunk: int,
    records: Sequence[Record],
    partition: int | None,
) -> Call:
    """Records as one binary batch; staging a chunk again replaces it, so resending is safe."""
    columns = validate.records(list(records), record_bytes_max=RECORD_CEILING)
    chunk = validate.whole(chunk, "chunk", 0, limits.staging_chunks_per_part_max - 1)
    body = b"".join(encode_batch(0, 0, columns)) if len(columns) else b""
    where = {**_staged(topic, writer, seq), "part": validate.staging_id(part, "part")}
    params = {}
    if partition is not None:
        params["partition"] = str(validate.whole(partition, "partition"))

    def parse(status: int, headers: dict[str, str], body: bytes) -> bool:
        return _answer(body, wire.Staged).staged

    headers = {"content-type": BATCH_TYPE}
    return _call("stage", {**where, "chunk": chunk}, params, body, headers, parse)


def publish(topic: str, writer: str, seq: int, parts: dict[str, int]) -> Call:
    body, headers = _json_body(wire.PublishIn(parts=validate.staged_parts(parts)))

    def parse(status: int, headers: dict[str, str], body: bytes) -> Published:
        return _answer(body, Published)

    return _call("publish", _staged(topic, writer, seq), {}, body, headers, parse)


def drop_staged(topic: str, writer: str, seq: int) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> bool:
        return _answer(body, wire.Dropped).dropped

    return _call("drop_staged", _staged(topic, writer, seq), {}, None, {}, parse)


def read(topic: str, partition: int, offset: int, limit: int) -> Call:
    validate.whole(partition, "partition")
    validate.whole(offset, "offset")
    # Capped as embedded reads are; the server sends whole batches, so cut here too.
    limit = min(validate.whole(limit, "limit", 1), limits.read_records_max)

    def parse(status: int, headers: dict[str, str], body: bytes) -> list[Record]:
        records: list[Record] = []
        for item in scan_batches(body, 0, None):
            if isinstance(item, str):
                raise CorruptData(f"the server sent a damaged batch: {item}")
            position, header = item
            got, _ = decode_records(body, position, header, topic, partition, offset)
            records.extend(got)
        return records[:limit]

    params = {"partition": partition, "offset": offset, "limit": limit}
    return _call("read", {"topic": topic}, params, None, {"accept": BATCH_TYPE}, parse)


# ---------------------------------------------------------------- stream groups


def poll(topic: str, group: str, start: str, max_records: int, timeout: float) -> Call:
    validate.whole(max_records, "max_records", 1)
    if not isinstance(timeout, int | float) or timeout < 0:
        raise BadRequest(f"timeout must be a number of seconds >= 0, not {timeout!r}")
    params = {"max_records": max_records, "wait_ms": int(timeout * 1000), "start": start}

    def parse(status: int, headers: dict[str, str], body: bytes) -> list[Record]:
        return [item.record(topic) for item in _answer(body, wire.Polled).records]

    # Not resent: a poll moves the group's position, so a lost answer would skip records.
    return _call("poll", {"topic": topic, "group": group}, params, None, {}, parse)


def commit(topic: str, group: str, start: str, offsets: dict[int, int] | None) -> Call:
    body, headers = (b"", {}) if offsets is None else _json_body(wire.CommitIn(offsets=offsets))
    where = {"topic": topic, "group": group}
    return _call("commit", where, {"start": start}, body, headers, _group)


def seek(topic: str, group: str, start: str, partition: int, offset: int) -> Call:
    body, headers = _json_body(wire.SeekIn(partition=partition, offset=offset))
    return _call("seek", {"topic": topic, "group": group}, {"start": start}, body, headers, _group)


def group(topic: str, group_name: str, start: str) -> Call:
    where = {"topic": topic, "group": group_name}
    return _call("describe_group", where, {"start": start}, None, {}, _group)


def _group(status: int, headers: dict[str, str], body: bytes) -> dict[str, dict[int, int]]:
    group = _answer(body, wire.GroupOut)
    return {"positions": group.positions, "committed": group.committed, "lag": group.lag}


def check_start(start: str) -> str:
    if start not in ("earliest", "latest"):
        raise BadRequest(f"start must be 'earliest' or 'latest', not {start!r}")
    return start


def check_names(topic: str, group_name: str | None = None) -> None:
    validate.topic_name(topic)
    if group_name is not None:
        validate.group_name(group_name)


# ---------------------------------------------------------------- queue groups


def _queue(topic: str, group_name: str) -> dict[str, str | int]:
    return {"topic": topic, "group": group_name}


def queue_settings(topic: str, group_name: str, create: bool = True, **settings: Any) -> Call:
    """PUT the settings that are not None; the group is created if new (unless not
    `create`: then 404 for an unknown topic or group). Returns its settings."""
    check_names(topic, group_name)
    given = {name: value for name, value in settings.items() if value is not None}
    if isinstance(given.get("backoff"), msgspec.Struct):
        given["backoff"] = msgspec.structs.asdict(given["backoff"])
    body, headers = _json_body(wire.request(wire.QueueSettingsIn, **given))

    def parse(status: int, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        settings: dict[str, Any] = msgspec.to_builtins(_answer(body, wire.QueueOut).settings)
        return settings

    params = {} if create else {"create": "false"}
    return _call("put_queue", _queue(topic, group_name), params, body, headers, parse)


def queue_state(topic: str, group_name: str, part: str) -> Call:
    """GET the group: its "settings" or its "stats"."""

    def parse(status: int, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        document: dict[str, Any] = msgspec.to_builtins(getattr(_answer(body, wire.QueueOut), part))
        return document

    return _call("describe_queue", _queue(topic, group_name), {}, None, {}, parse)


def lease(
    topic: str, group_name: str, max_records: int, timeout: float, visibility: int | None
) -> Call:
    validate.whole(max_records, "max_records", 1)
    seconds = validate.seconds(timeout, "timeout")
    body, headers = _json_body(
        wire.LeaseIn(
            max_records=max_records,
            wait_ms=int(seconds * 1000),
            visibility_timeout_ms=visibility,
        )
    )

    def parse(status: int, headers: dict[str, str], body: bytes) -> list[Job]:
        if headers.get("content-type") != BATCH_TYPE:
            return [
                Job(item.record(topic), item.attempt, item.receipt)
                for item in _answer(body, wire.Jobs).jobs
            ]
        meta = _json(headers.get("brook-jobs", "[]"))
        records: list[Record] = []
        for item in scan_batches(body, 0, None):
            if isinstance(item, str):
                raise CorruptData(f"the server sent a damaged batch: {item}")
            position, header = item
            partition = meta[len(records)][0]
            got, _ = decode_records(body, position, header, topic, partition)
            records.extend(got)
        if len(records) != len(meta):
            raise CorruptData("the server's leased records and their receipts do not match")
        return [
            Job(record, attempt, receipt)
            for record, (_, attempt, receipt) in zip(records, meta, strict=True)
        ]

    # Not resent: a lost answer would leave its records leased until they expire.
    headers["accept"] = BATCH_TYPE
    return _call("lease", _queue(topic, group_name), {}, body, headers, parse)


def settle(topic: str, group_name: str, action: str, receipts: list[str], **fields: Any) -> Call:
    """ack, nack, release, extend or discard. Not resent: if the first try landed, a
    second would find its receipts stale and report LeaseExpired for work that was done."""
    shapes: dict[str, type[wire.In]] = {
        "ack": wire.AckIn,
        "nack": wire.NackIn,
        "release": wire.NackIn,
        "extend": wire.ExtendIn,
    }
    given = {k: v for k, v in fields.items() if v is not None}
    body, headers = _json_body(
        wire.request(shapes.get(action, wire.SettleIn), receipts=receipts, **given)
    )

    def parse(status: int, headers: dict[str, str], body: bytes) -> None:
        return None

    return _call(action, _queue(topic, group_name), {}, body, headers, parse)


def job(topic: str, group_name: str, partition: int, offset: int, timeout: float = 0.0) -> Call:
    seconds = min(validate.seconds(timeout, "timeout"), limits.wait_ms_max / 1000)
    params = {
        "partition": validate.whole(partition, "partition"),
        "offset": validate.whole(offset, "offset"),
    }
    if seconds:
        params["wait_ms"] = int(seconds * 1000)

    def parse(status: int, headers: dict[str, str], body: bytes) -> JobInfo:
        return _answer(body, wire.JobInfoOut).info()

    return _call("job", _queue(topic, group_name), params, None, {}, parse)


# ---------------------------------------------------------------- timers


def _timer_in(spec: TimerSpec) -> wire.TimerIn:
    validate.topic_name(spec.topic)
    record, _ = validate.record(spec.value, spec.key, spec.headers, record_bytes_max=RECORD_CEILING)
    return wire.request(
        wire.TimerIn,
        topic=spec.topic,
        value_b64=record.value,
        key_b64=record.key,
        headers_b64=record.headers or None,
        at=spec.at,
        delay_ms=spec.delay_ms,
        timer_id=spec.timer_id,
    )


def schedule_many(specs: Sequence[TimerSpec]) -> Call:
    body, headers = _json_body(wire.TimersIn(timers=[_timer_in(spec) for spec in specs]))

    def parse(status: int, headers: dict[str, str], body: bytes) -> list[str]:
        return _answer(body, wire.ScheduledMany).timer_ids

    # Resent only when every timer is named: the first one stands, so nothing doubles.
    named = all(spec.timer_id is not None for spec in specs)
    return _call("schedule", {}, {}, body, headers, parse, retry_safe=named)


def timer(timer_id: str) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> TimerInfo:
        return _answer(body, wire.TimerOut).returned()

    return _call("describe_timer", {"timer": timer_id}, {}, None, {}, parse)


def cancel_timer(timer_id: str) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> bool:
        return True

    return _call("cancel_timer", {"timer": timer_id}, {}, None, {}, parse)


# ---------------------------------------------------------------- joins


def create_joins(specs: Sequence[JoinSpec]) -> Call:
    """Retry-safe as the table says: a join id with the same definition is made once."""
    joins = []
    for spec in specs:
        if not isinstance(spec, JoinSpec):
            raise BadRequest(f"a join is a brook.JoinSpec, not {type(spec).__name__}")
        joins.append(
            {
                "id": spec.id,
                "members": [_member(m) for m in spec.members],
                "then": None if spec.then is None else _join_record(spec.then),
                "on_error": None if spec.on_error is None else _join_record(spec.on_error),
                "allow_failures": spec.allow_failures,
            }
        )
    body, headers = _json_body(wire.request(wire.JoinsIn, joins=joins))

    def parse(status: int, headers: dict[str, str], body: bytes) -> list[JoinInfo]:
        return [out.info() for out in _answer(body, wire.Joins).joins]

    return _call("create_joins", {}, {}, body, headers, parse)


def _member(member: JoinMember) -> dict[str, Any]:
    if member.join is not None:
        return {"topic": member.topic, "group": member.group, "join": member.join}
    return {
        "topic": member.topic,
        "group": member.group,
        "partition": member.partition,
        "offset": member.offset,
    }


def _join_record(record: JoinContinuation) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "group": record.group,
        "value_b64": record.value,
        "key_b64": record.key,
        "headers_b64": record.headers or None,
    }


def join(join_id: str, timeout: float = 0.0) -> Call:
    if not isinstance(join_id, str) or not names.ID.fullmatch(join_id):
        raise BadRequest(f"{join_id!r} is not a join id")
    seconds = min(validate.seconds(timeout, "timeout"), limits.wait_ms_max / 1000)
    params = {"wait_ms": int(seconds * 1000)} if seconds else {}

    def parse(status: int, headers: dict[str, str], body: bytes) -> JoinInfo:
        return _answer(body, wire.JoinOut).info()

    return _call("describe_join", {"join": join_id}, params, None, {}, parse)


def _schedule_name(name: str) -> dict[str, str]:
    if not isinstance(name, str) or not names.ID.fullmatch(name):
        raise BadRequest(f"{name!r} is not a schedule name")
    return {"schedule": name}


def delete_schedule(name: str) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> None:
        return None

    return _call("delete_schedule", _schedule_name(name), {}, None, {}, parse)
