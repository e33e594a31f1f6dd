"""The client's side of the HTTP API, without I/O: calls in, requests out, responses parsed.

Each API method becomes a Call (what to send, how to read the answer, whether
resending it is safe); client/sync.py and client/aio.py only carry Calls over
HTTP. Appends and reads use the binary batch format (docs/PROTOCOL.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from brook import limits, names, validate, wire
from brook.codec import decode_records, encode_batch, scan_batches
from brook.codec.batch import Columns
from brook.errors import BadRequest, BrookError, CorruptData, from_code
from brook.models import (
    JobInfo,
    LakeStatus,
    MessageAttempts,
    Outcome,
    ScheduleInfo,
    State,
    TimerInfo,
    TimerPage,
    TimerSpec,
    Transition,
)
from brook.operations import OPERATIONS, path_of
from brook.records import (
    Ack,
    Attempt,
    DeliveryStats,
    EndpointInfo,
    EventTypeInfo,
    Job,
    JoinContinuation,
    JoinInfo,
    JoinMember,
    JoinSpec,
    PortalLink,
    Published,
    Record,
    Resent,
    TestResult,
    UniqueAck,
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


def _json_body(document: wire.In) -> tuple[bytes, dict[str, str]]:
    return wire.encode(document), {"content-type": wire.JSON_TYPE}


def _acks(status: int, headers: dict[str, str], body: bytes) -> list[Ack]:
    return _answer(body, wire.Acks).acks


# ---------------------------------------------------------------- topics


def create_topic(
    name: str,
    partitions: int,
    retention_ms: int | None,
    retention_bytes: int | None,
    compaction: bool,
    lake: bool | None = None,
    value_schema: dict[str, Any] | None = None,
) -> Call:
    body, headers = _json_body(
        wire.TopicSettingsIn(
            partitions=partitions,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            compaction=compaction,
            lake=lake,
            value_schema=value_schema,
        )
    )
    return _call(
        "create_topic",
        {"topic": name},
        {},
        body,
        headers,
        lambda s, h, b: _answer(b, wire.TopicOut).info(),
    )


def topics() -> Call:
    return _call(
        "list_topics",
        {},
        {},
        None,
        {},
        lambda s, h, b: [t.info() for t in _answer(b, wire.Topics).topics],
    )


def delete_topic(name: str) -> Call:
    return _call("delete_topic", {"topic": name}, {}, None, {}, lambda s, h, b: None)


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


def trace(topic: str, group_name: str, partition: int, offset: int) -> Call:
    params = {
        "partition": validate.whole(partition, "partition"),
        "offset": validate.whole(offset, "offset"),
    }

    def parse(status: int, headers: dict[str, str], body: bytes) -> list[Transition]:
        return [
            Transition(
                t.at_ms,
                State(t.state),
                t.attempt,
                t.reason,
                t.receipt,
                t.until_ms,
                None
                if t.outcome is None
                else Outcome(
                    t.outcome.status, t.outcome.latency_ms, t.outcome.error, t.outcome.excerpt_b64
                ),
            )
            for t in _answer(body, wire.Trace).transitions
        ]

    return _call("trace", _queue(topic, group_name), params, None, {}, parse)


def redrive(
    topic: str, group_name: str, limit: int | None, records: Iterable[tuple[int, int]] | None
) -> Call:
    chosen = validate.positions(records)
    body, headers = _json_body(
        wire.RedriveIn(
            limit=validate.optional_whole(limit, "limit", 1),
            records=None
            if chosen is None
            else [wire.PositionIn(partition=p, offset=o) for p, o in chosen],
        )
    )

    def parse(status: int, headers: dict[str, str], body: bytes) -> int:
        return _answer(body, wire.Redriven).redriven

    return _call("redrive_queue", _queue(topic, group_name), {}, body, headers, parse)


def cancel(
    topic: str,
    group_name: str,
    records: Iterable[tuple[int, int]] | None,
    key: bytes | str | None,
    reason: str,
) -> Call:
    chosen, key_bytes = validate.cancelled(records, key)
    body, headers = _json_body(
        wire.CancelIn(
            records=None
            if chosen is None
            else [wire.PositionIn(partition=p, offset=o) for p, o in chosen],
            key_b64=key_bytes,
            reason=validate.reason(reason),
        )
    )

    def parse(status: int, headers: dict[str, str], body: bytes) -> list[tuple[int, int]]:
        return [(r.partition, r.offset) for r in _answer(body, wire.RecordsCancelled).cancelled]

    return _call("cancel_records", _queue(topic, group_name), {}, body, headers, parse)


def enqueue_unique(
    topic: str,
    group_name: str,
    identity: str,
    value: bytes,
    key: bytes | None,
    headers: dict[str, bytes] | None,
    replace: bool,
) -> Call:
    """Safe to resend without `replace` (the record appended first is then found live)."""
    record, _ = validate.record(value, key, headers, record_bytes_max=RECORD_CEILING)
    body, sent = _json_body(
        wire.request(
            wire.UniqueIn,
            identity=identity,
            replace=bool(replace),
            value_b64=record.value,
            key_b64=record.key,
            headers_b64=record.headers or None,
        )
    )

    def parse(status: int, headers: dict[str, str], body: bytes) -> UniqueAck:
        return _answer(body, wire.UniqueOut).ack()

    return _call(
        "enqueue_unique", _queue(topic, group_name), {}, body, sent, parse, retry_safe=not replace
    )


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


def _timer_info(out: wire.TimerOut) -> TimerInfo:
    return TimerInfo(
        out.timer_id,
        out.state,
        out.topic,
        out.due_ms,
        out.partition,
        out.offset,
        out.fired_at_ms if out.state == "fired" else out.cancelled_at_ms,
    )


def timer(timer_id: str) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> TimerInfo:
        return _timer_info(_answer(body, wire.TimerOut))

    return _call("describe_timer", {"timer": timer_id}, {}, None, {}, parse)


def _lake(status: int, headers: dict[str, str], body: bytes) -> list[LakeStatus]:
    topics = _answer(body, wire.Lake).topics
    return msgspec.convert(topics, list[LakeStatus], from_attributes=True)


def lake_status(topic: str | None) -> Call:
    return _call("lake_status", {}, {} if topic is None else {"topic": topic}, None, {}, _lake)


def lake_sync(topic: str | None) -> Call:
    body, headers = _json_body(wire.LakeSyncIn(topic=topic))
    return _call("lake_sync", {}, {}, body, headers, _lake)


def list_timers(
    topic: str | None,
    due_from_ms: int | None,
    due_to_ms: int | None,
    after: str | None,
    limit: int,
) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> TimerPage:
        page = _answer(body, wire.TimersPage)
        return TimerPage([_timer_info(t) for t in page.timers], page.next)

    given = {
        "topic": topic,
        "due_from_ms": due_from_ms,
        "due_to_ms": due_to_ms,
        "after": after,
        "limit": limit,
    }
    params = {name: value for name, value in given.items() if value is not None}
    return _call("list_timers", {}, params, None, {}, parse)


def cancel_timer(timer_id: str) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> bool:
        return True

    return _call("cancel_timer", {"timer": timer_id}, {}, None, {}, parse)


# ---------------------------------------------------------------- delivery endpoints


def _endpoint(status: int, headers: dict[str, str], body: bytes) -> EndpointInfo:
    return _answer(body, EndpointInfo)


def create_endpoint(name: str, **settings: Any) -> Call:
    """PUT the settings that are not None; the endpoint is created if new."""
    validate.topic_name(name)
    given = {k: v for k, v in settings.items() if v is not None}
    if isinstance(given.get("backoff"), msgspec.Struct):
        given["backoff"] = msgspec.structs.asdict(given["backoff"])
    if "topics" in given:
        given["topics"] = list(given["topics"])
    body, headers = _json_body(wire.request(wire.EndpointIn, **given))
    # Resent safely: the same settings again change nothing (a secret given again is the
    # same secret; one made by the first try would be replaced by the second's).
    safe = "secret" in given
    return _call("put_endpoint", {"endpoint": name}, {}, body, headers, _endpoint, retry_safe=safe)


def endpoints() -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> list[EndpointInfo]:
        return _answer(body, wire.Endpoints).endpoints

    return _call("list_endpoints", {}, {}, None, {}, parse)


def endpoint_info(name: str) -> Call:
    validate.topic_name(name)
    return _call("describe_endpoint", {"endpoint": name}, {}, None, {}, _endpoint)


def put_event_type(name: str, description: str | None, schema: dict[str, Any] | None) -> Call:
    validate.event_type(name)
    body, headers = _json_body(wire.EventTypeIn(description=description, schema=schema))

    def parse(status: int, headers: dict[str, str], body: bytes) -> EventTypeInfo:
        return _answer(body, EventTypeInfo)

    return _call("put_event_type", {"event_type": name}, {}, body, headers, parse)


def portal_link(tenant: str, ttl_s: int) -> Call:
    body, headers = _json_body(wire.PortalIn(tenant=validate.tenant(tenant), ttl_s=ttl_s))

    def parse(status: int, headers: dict[str, str], body: bytes) -> PortalLink:
        return _answer(body, PortalLink)

    return _call("portal_link", {}, {}, body, headers, parse)


def event_types() -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> list[EventTypeInfo]:
        return _answer(body, wire.EventTypes).event_types

    return _call("list_event_types", {}, {}, None, {}, parse)


def event_type(name: str) -> Call:
    validate.event_type(name)

    def parse(status: int, headers: dict[str, str], body: bytes) -> EventTypeInfo:
        return _answer(body, EventTypeInfo)

    return _call("describe_event_type", {"event_type": name}, {}, None, {}, parse)


def delete_event_type(name: str) -> Call:
    validate.event_type(name)

    def parse(status: int, headers: dict[str, str], body: bytes) -> None:
        return None

    return _call("delete_event_type", {"event_type": name}, {}, None, {}, parse)


def delete_endpoint(name: str) -> Call:
    validate.topic_name(name)

    def parse(status: int, headers: dict[str, str], body: bytes) -> None:
        return None

    return _call("delete_endpoint", {"endpoint": name}, {}, None, {}, parse)


def endpoint_stats(name: str) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> DeliveryStats:
        return _answer(body, DeliveryStats)

    return _call("endpoint_stats", {"endpoint": name}, {}, None, {}, parse)


def endpoint_attempts(name: str, topic: str, partition: int, offset: int) -> Call:
    params = {
        "topic": validate.topic_name(topic),
        "partition": validate.whole(partition, "partition"),
        "offset": validate.whole(offset, "offset"),
    }

    def parse(status: int, headers: dict[str, str], body: bytes) -> list[Attempt]:
        return [_attempt(a) for a in _answer(body, wire.Attempts).attempts]

    return _call("endpoint_attempts", {"endpoint": name}, params, None, {}, parse)


def _attempt(a: wire.AttemptOut) -> Attempt:
    return Attempt(
        attempt=a.attempt,
        at_ms=a.at_ms,
        state=a.state,
        status=a.status,
        latency_ms=a.latency_ms,
        error=a.error,
        reason=a.reason,
        excerpt=a.excerpt_b64,
    )


def message_attempts(webhook_id: str) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> list[MessageAttempts]:
        return [
            MessageAttempts(endpoint=e.endpoint, attempts=[_attempt(a) for a in e.attempts])
            for e in _answer(body, wire.MessageAttemptsOut).endpoints
        ]

    return _call("message_attempts", {"message": webhook_id}, {}, None, {}, parse)


def endpoint_redrive(
    name: str, topic: str | None, limit: int | None, records: Iterable[tuple[int, int]] | None
) -> Call:
    chosen = validate.positions(records)
    body, headers = _json_body(
        wire.EndpointRedriveIn(
            topic=None if topic is None else validate.topic_name(topic),
            limit=validate.optional_whole(limit, "limit", 1),
            records=None
            if chosen is None
            else [wire.PositionIn(partition=p, offset=o) for p, o in chosen],
        )
    )

    def parse(status: int, headers: dict[str, str], body: bytes) -> int:
        return _answer(body, wire.Redriven).redriven

    return _call("redrive_endpoint", {"endpoint": name}, {}, body, headers, parse)


def endpoint_replay(
    name: str, topic: str | None, since_ms: int | None, partition: int | None, offset: int | None
) -> Call:
    since_ms, partition, offset = validate.replay_from(topic, since_ms, partition, offset)
    body, headers = _json_body(
        wire.EndpointReplayIn(
            topic=None if topic is None else validate.topic_name(topic),
            since_ms=since_ms,
            partition=partition,
            offset=offset,
        )
    )

    def parse(status: int, headers: dict[str, str], body: bytes) -> int:
        return _answer(body, wire.Replayed).replayed

    return _call("replay_endpoint", {"endpoint": name}, {}, body, headers, parse)


def endpoint_resend(name: str, webhook_id: str) -> Call:
    body, headers = _json_body(wire.ResendIn(webhook_id=validate.webhook_id(webhook_id)))

    def parse(status: int, headers: dict[str, str], body: bytes) -> Resent:
        return _answer(body, Resent)

    # Not resent on a lost answer: the message would go twice more, not once.
    return _call("resend_message", {"endpoint": name}, {}, body, headers, parse)


def endpoint_action(name: str, action: str) -> Call:
    """enable or disable: the endpoint's settings after."""
    return _call(f"{action}_endpoint", {"endpoint": name}, {}, b"", {}, _endpoint)


def endpoint_test(name: str) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> TestResult:
        out = _answer(body, wire.TestOut)
        return TestResult(
            status=out.status, latency_ms=out.latency_ms, error=out.error, excerpt=out.excerpt_b64
        )

    return _call("test_endpoint", {"endpoint": name}, {}, b"", {}, parse)


def rotate_secret(name: str, secret: str | None) -> Call:
    body, headers = _json_body(wire.RotateIn(secret=secret))

    def parse(status: int, headers: dict[str, str], body: bytes) -> str:
        return _answer(body, wire.Rotated).secret

    return _call("rotate_secret", {"endpoint": name}, {}, body, headers, parse)


# ---------------------------------------------------------------- periodic schedules


def _schedule(status: int, headers: dict[str, str], body: bytes) -> ScheduleInfo:
    return _answer(body, wire.ScheduleOut).info()


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


def put_schedule(name: str, topic: str, value: bytes, **given: Any) -> Call:
    validate.topic_name(topic)
    record, _ = validate.record(
        value, given.pop("key", None), given.pop("headers", None), record_bytes_max=RECORD_CEILING
    )
    body, headers = _json_body(
        wire.request(
            wire.ScheduleIn,
            topic=topic,
            value_b64=record.value,
            key_b64=record.key,
            headers_b64=record.headers or None,
            **given,
        )
    )
    return _call("put_schedule", _schedule_name(name), {}, body, headers, _schedule)


def list_schedules() -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> list[ScheduleInfo]:
        return [out.info() for out in _answer(body, wire.Schedules).schedules]

    return _call("list_schedules", {}, {}, None, {}, parse)


def schedule_action(name: str, action: str) -> Call:
    """describe_schedule, pause_schedule or resume_schedule."""
    return _call(action, _schedule_name(name), {}, None, {}, _schedule)


def delete_schedule(name: str) -> Call:
    def parse(status: int, headers: dict[str, str], body: bytes) -> None:
        return None

    return _call("delete_schedule", _schedule_name(name), {}, None, {}, parse)
