"""What a join is and how it decides. Pure: no I/O, no clock.

A join waits for its members, jobs in queue groups, to finish: each member
arrives once, by its index, acked (with its result) or dead (with its error).
When every member has arrived acked (or, with `allow_failures`, arrived at
all) the join *fires*: its continuation record, with the members' results in
the header `brook.join.results` (brook/join_headers.py), is appended once, by an
append whose idempotency key names the join. A member dead (and failures not allowed) *fails* the join instead: the
continuation is never appended; an `on_error` record, if given, is appended
once in its place, naming the member and its error.

A member is a record already appended (topic, group, partition, offset) or the
continuation of another join, not yet appended (`join`): a chain is joins of
one whose members are the joins before. A failed join fails the joins waiting
on its continuation, so a chain ends dead at the first link that did.

    open ──every member acked──▶ fired ──(its continuation appended)
      │
      └──a member dead────────▶ failed ──(on_error appended, if any)
"""

from __future__ import annotations

from typing import Literal

import msgspec

from brook import join_headers, limits
from brook.records import JoinContinuation as Continuation
from brook.records import JoinMember as Member
from brook.records import JoinSpec as Spec
from brook.records import Record

__all__ = ["Continuation", "Member", "Spec"]

Ended = Literal["fired", "failed"]


class Arrival(msgspec.Struct, frozen=True, array_like=True):
    """How one member finished."""

    ok: bool
    data: bytes
    """The result its ack carried (b"" for none), or its error (UTF-8)."""
    ref: str
    """Its record, topic/partition/offset."""


class Stored(msgspec.Struct, frozen=True, kw_only=True):
    """A join and where it stands: what its file holds."""

    spec: Spec
    created_ms: int
    arrived: dict[int, Arrival] = {}
    ended: Ended | None = None
    ended_ms: int | None = None
    error: str = ""
    """Why it failed: the first dead member's error."""
    failed_ref: str = ""
    """The record of the job that failed first (through the joins before, for a chain)."""
    partition: int | None = None
    offset: int | None = None
    """Where its continuation was appended, once it was."""


def member_ref(member: Member) -> str:
    """How a member is named in errors: its record, or the join it comes after."""
    if member.join is not None:
        return f"{member.topic}/after/{member.join}"
    return f"{member.topic}/{member.partition}/{member.offset}"


def arrive(stored: Stored, index: int, arrival: Arrival) -> Stored:
    """The join with member `index` arrived; unchanged when it had, or the join ended.
    A member counts once, however many times its finish is reported."""
    if stored.ended is not None or index in stored.arrived:
        return stored
    assert 0 <= index < len(stored.spec.members)
    return msgspec.structs.replace(stored, arrived={**stored.arrived, index: arrival})


def verdict(stored: Stored) -> Ended | None:
    """What the join does now: fire, fail, or (None) wait for more members."""
    if stored.ended is not None:
        return None
    if not stored.spec.allow_failures and any(not a.ok for a in stored.arrived.values()):
        return "failed"
    if len(stored.arrived) == len(stored.spec.members):
        return "fired"
    return None


def first_failure(stored: Stored) -> Arrival | None:
    """The failed member of the lowest index."""
    failed = [i for i, a in stored.arrived.items() if not a.ok]
    return stored.arrived[min(failed)] if failed else None


def append_key(join_id: str, error: bool = False) -> str:
    """The idempotency key of the append of the join's continuation (or on_error
    record): a decision made again after a restart appends nothing new."""
    return f"brook.join:{join_id}:{'error' if error else 'then'}"


def encode_results(stored: Stored) -> bytes:
    arrived = [stored.arrived[i] for i in range(len(stored.spec.members))]
    return join_headers.encode_results([(a.ok, a.data, a.ref) for a in arrived])


def continuation(stored: Stored) -> tuple[str, Record] | None:
    """(topic, record) the join appends once every member is acked: its continuation,
    the results in its headers (None: the join has no continuation)."""
    then = stored.spec.then
    if then is None:
        return None
    headers = dict(then.headers or {})
    headers[join_headers.JOIN] = stored.spec.id.encode()
    headers[join_headers.RESULTS] = encode_results(stored)
    return then.topic, Record(then.value, then.key, headers)


def error_record(stored: Stored) -> tuple[str, Record] | None:
    """(topic, record) a failed join appends: its on_error record, or None."""
    on_error = stored.spec.on_error
    if on_error is None:
        return None
    headers = dict(on_error.headers or {})
    headers[join_headers.JOIN] = stored.spec.id.encode()
    headers[join_headers.ERROR] = stored.error.encode()[: limits.join_error_bytes_max]
    headers[join_headers.FAILED] = stored.failed_ref.encode()
    return on_error.topic, Record(on_error.value, on_error.key, headers)


def record_bytes(record: Record) -> int:
    """The size of a record as a broker's record_bytes_max counts it."""
    size = len(record.value) + len(record.key or b"")
    for name, value in (record.headers or {}).items():
        size += len(name.encode()) + len(value)
    return size


def ended(stored: Stored, how: Ended, now_ms: int, error: str = "", failed_ref: str = "") -> Stored:
    if how == "failed" and not error:
        failure = first_failure(stored)
        if failure is not None:
            error = failure.data.decode(errors="replace")
            failed_ref = failure.ref
    return msgspec.structs.replace(
        stored, ended=how, ended_ms=now_ms, error=error, failed_ref=failed_ref
    )
