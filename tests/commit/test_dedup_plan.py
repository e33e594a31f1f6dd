"""A round's idempotency plan (commit/dedup.py): which records of the round's requests
are appended, and what each record is answered with, for any mix of keyed and unkeyed
records, repeats within a request, across requests, of durable and of in-flight keys.
Checked against the rule written plainly, record by record."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from brook.codec.batch import Columns
from brook.commit.dedup import Plan
from brook.commit.requests import AppendRequest
from brook.idempotency import IdempotencyIndex
from brook.records import Ack

KEYS = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d", b"e"]))
REQUEST = st.lists(st.tuples(KEYS, st.booleans()), min_size=1, max_size=12)


def plainly(
    requests: list[list[tuple[bytes | None, bool]]], durable: dict[bytes, Ack], inflight: set[bytes]
) -> tuple[list[bytes], list[list[Any]]]:
    """The rule, one record at a time: a durable key is answered with its ack, an
    in-flight one waits for that write, a key already in this round shares that
    record; anything else is appended."""
    appended: list[bytes] = []
    seen: dict[bytes, int] = {}
    answers: list[list[Any]] = []
    for r, records in enumerate(requests):
        slots: list[Any] = []
        for i, (key, _) in enumerate(records):
            if key is not None and key in durable:
                slots.append(durable[key])
            elif key is not None and key in inflight:
                slots.append(("in flight", key))
            elif key is not None and key in seen:
                slots.append(seen[key])
            else:
                if key is not None:
                    seen[key] = len(appended)
                slots.append(len(appended))
                appended.append(b"%d.%d" % (r, i))
        answers.append(slots)
    return appended, answers


@given(
    requests=st.lists(REQUEST, min_size=1, max_size=4),
    durable=st.sets(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]), max_size=2),
    flying=st.sets(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]), max_size=2),
)
def test_the_plan_appends_and_answers_as_the_rule_says(
    requests: list[list[tuple[bytes | None, bool]]], durable: set[bytes], flying: set[bytes]
) -> None:
    flying -= durable
    index = IdempotencyIndex(60_000)
    acks = {key: Ack(0, 1000 + n, 0) for n, key in enumerate(sorted(durable))}
    for key, ack in acks.items():
        index.add("t", key, ack)
    other = SimpleNamespace(name="an earlier batch")
    inflight: dict[tuple[str, bytes], Any] = {("t", key): (other, 7) for key in flying}
    group = []
    for r, records in enumerate(requests):
        keyed = any(key is not None for key, _ in records)
        columns = Columns(
            [b"%d.%d" % (r, i) for i in range(len(records))],
            [b"k" if has_key else None for _, has_key in records],
            None,
            [key for key, _ in records] if keyed else None,
        )
        group.append(AppendRequest(SimpleNamespace(topic="t"), columns))  # type: ignore[arg-type]
    batch = SimpleNamespace(log=SimpleNamespace(topic="t"), group=group)
    plan = Plan(index, inflight, batch)  # type: ignore[arg-type]
    appended, answers = plainly(requests, acks, flying)
    got = [value for piece in plan.pieces for value in piece.values]
    assert got == appended
    resolved = [
        [("in flight", k) if s == (other, 7) else s for s, k in zip(slots, _keys(r), strict=True)]
        for slots, r in zip(plan.slots, requests, strict=True)
    ]
    assert resolved == answers
    # Each appended record keeps its own record key (the "k" column) with it.
    flat = [record for r in requests for record in r]
    by_value = {
        b"%d.%d" % (r, i): has for r, rs in enumerate(requests) for i, (_, has) in enumerate(rs)
    }
    keys = [k for piece in plan.pieces for k in (piece.keys or [None] * len(piece))]
    assert keys == [b"k" if by_value[v] else None for v in got]
    assert len(flat) == sum(len(slots) for slots in plan.slots)


def _keys(records: list[tuple[bytes | None, bool]]) -> list[bytes | None]:
    return [key for key, _ in records]
