"""The rules of staged writes, without storage (brook/staging/plan.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.codec.batch import Columns, encode_batch
from brook.partitioner import partition_for_key
from brook.staging import plan

keys = st.one_of(st.none(), st.binary(max_size=8))
chunks = st.lists(st.tuples(st.binary(max_size=20), keys), min_size=1, max_size=50)


def columns_of(rows: list[tuple[bytes, bytes | None]]) -> Columns:
    ks = [k for _, k in rows]
    return Columns([v for v, _ in rows], None if ks.count(None) == len(ks) else ks)


@given(chunks, st.one_of(st.none(), st.integers(0, 7)))
def test_a_chunk_reads_back_as_staged(
    rows: list[tuple[bytes, bytes | None]], partition: int | None
) -> None:
    columns = columns_of(rows)
    raw = plan.encode_chunk(b"".join(encode_batch(0, 0, columns)), partition)
    target, back = plan.decode_chunk(raw, "chunk")
    assert target == partition
    assert back.values == columns.values and back.keys == columns.keys


@given(chunks, st.integers(1, 16), st.binary(min_size=1, max_size=30))
def test_routing_is_the_same_on_every_publish_and_covers_each_row_once(
    rows: list[tuple[bytes, bytes | None]], partitions: int, seed: bytes
) -> None:
    columns = columns_of(rows)
    routed = plan.route(columns, partitions, None, seed)
    assert routed == plan.route(columns_of(rows), partitions, None, seed)
    assert sorted(i for _, indexes in routed for i in indexes) == list(range(len(rows)))
    unkeyed = {p for p, indexes in routed for i in indexes if rows[i][1] is None}
    assert len(unkeyed) <= 1
    for p, indexes in routed:
        for i in indexes:
            key = rows[i][1]
            if key is not None and partitions > 1:
                assert p == partition_for_key(key, partitions)


@given(chunks)
def test_a_piece_marks_only_its_last_record(rows: list[tuple[bytes, bytes | None]]) -> None:
    columns = columns_of(rows)
    indexes = list(range(0, len(rows), 2))
    piece = plan.piece(columns, indexes, b"marker")
    assert piece.values == [columns.values[i] for i in indexes]
    assert piece.idempotency == [None] * (len(indexes) - 1) + [b"marker"]
    assert columns.idempotency is None  # the chunk itself is left as it was


def test_markers_differ_for_every_piece() -> None:
    seen = {
        plan.marker(w, s, part, c, p)
        for w in ("a", "b")
        for s in (0, 1)
        for part in ("x", "y")
        for c in (0, 1)
        for p in (0, 1)
    }
    assert len(seen) == 32


def test_what_a_publish_does_given_the_writers_last() -> None:
    def state(seq: int, phase: str) -> plan.WriterState:
        return plan.WriterState(seq, phase, {}, {}, 0, 0)  # type: ignore[arg-type]

    assert plan.decide(None, 0) == "new"
    assert plan.decide(state(3, "done"), 4) == "new"
    assert plan.decide(state(3, "done"), 3) == "done"
    assert plan.decide(state(3, "publishing"), 3) == "resume"
    assert plan.decide(state(3, "publishing"), 2) == "stale"
    assert plan.decide(state(3, "done"), 0) == "stale"
