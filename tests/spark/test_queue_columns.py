"""The state columns a `brook_queue` task adds (with numpy, per slice) say of each
record what `standing_of` says of it, one record at a time. No Spark needed."""

from __future__ import annotations

from itertools import pairwise

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from brook.lake.arrow import SCHEMA
from brook.log.view import SegmentSlice
from brook.models import State, Transition
from brook.queue.inspect import GroupState, Touched, standing_of
from brook.queue.lifecycle import JobState
from brook.spark.queue import standings, with_state

TOP = 200


@st.composite
def group_states(draw: st.DrawFn) -> GroupState:
    floor, acked, touched = {}, {}, {}
    for p in (0, 1):
        floor[p] = draw(st.integers(0, 40))
        cuts = sorted(draw(st.sets(st.integers(floor[p] + 1, TOP), max_size=12)))
        acked[p] = [(a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=False)]
        for o in draw(st.sets(st.integers(floor[p], TOP - 1), max_size=30)):
            state = draw(st.sampled_from([State.LEASED, State.RETRYING, State.DEAD, State.READY]))
            job = JobState(
                state, attempt=draw(st.integers(1, 5)), error=draw(st.sampled_from(["", "e"]))
            )
            changed = draw(st.none() | st.just(Transition(1_000 + o, state, job.attempt)))
            touched[(p, o)] = Touched(job, changed)
    return GroupState(floor, acked, touched)


def _records(partition: int, offsets: list[int]) -> pa.RecordBatch:
    rows = [
        {"topic": "t", "partition": partition, "offset": o, "timestamp": 0, "value": b"v"}
        for o in offsets
    ]
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


@settings(max_examples=200, deadline=None)
@given(state=group_states(), cuts=st.lists(st.integers(1, TOP - 1), max_size=6))
def test_every_record_gets_the_state_the_log_gives_it(state: GroupState, cuts: list[int]) -> None:
    bounds = [0, *sorted(set(cuts)), TOP]
    pieces = [
        SegmentSlice("t", p, "seg", lo, hi, 0, 0) for p in (0, 1) for lo, hi in pairwise(bounds)
    ]
    for piece, known in zip(pieces, standings(state, pieces), strict=True):
        offsets = list(range(piece.start_offset, piece.end_offset))
        table = with_state(_records(piece.partition, offsets), known).to_pylist()
        for offset, row in zip(offsets, table, strict=True):
            standing = standing_of(state, piece.partition, offset)
            if isinstance(standing, Touched):
                job = standing.job
                expected = (job.state.value, job.attempt, job.error or None)
                assert (row["state"], row["attempts"], row["error"]) == expected, offset
                assert (row["changed_at"] is None) == (standing.changed is None)
                assert (row["due_at"] is None) == (job.state not in (State.LEASED, State.RETRYING))
            else:
                assert row["state"] == standing.value, (piece.partition, offset)
                assert row["attempts"] == (0 if standing is State.READY else None)
            assert row["offset"] == offset and row["value"] == b"v"
