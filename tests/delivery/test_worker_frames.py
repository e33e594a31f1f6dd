"""The frames between the broker and its delivery workers: whatever way the stream is
cut into reads, the same messages come out, in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.delivery.outcome import ErrorKind, Result
from brook.delivery.workers import (
    Attempt,
    Done,
    Forget,
    Frames,
    decode_done,
    decode_to_worker,
    frame,
)

attempts = st.builds(
    Attempt,
    id=st.integers(0, 2**62),
    endpoint=st.text(max_size=20),
    value=st.binary(max_size=3000),
    headers=st.none() | st.dictionaries(st.text(max_size=10), st.binary(max_size=20), max_size=3),
    key=st.none() | st.binary(max_size=20),
    topic=st.text(max_size=20),
    partition=st.integers(0, 1000),
    offset=st.integers(0, 2**62),
    attempt=st.integers(1, 100),
    message_id=st.text(max_size=40),
    now_ms=st.integers(0, 2**50),
)
to_worker = attempts | st.builds(Forget, name=st.text(max_size=20))
results = st.builds(
    Result,
    status=st.none() | st.integers(100, 599),
    error=st.none() | st.sampled_from(list(ErrorKind)),
    error_message=st.text(max_size=50),
    latency_ms=st.floats(0, 1e6),
    retry_after=st.none() | st.text(max_size=10),
    excerpt=st.binary(max_size=2048),
)


def _cut(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts})
    return [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]


@given(st.lists(to_worker, max_size=8), st.lists(st.integers(0, 10**6), max_size=12))
def test_messages_to_a_worker_survive_any_cut(
    messages: list[Attempt | Forget], cuts: list[int]
) -> None:
    stream = b"".join(frame(m) for m in messages)
    frames = Frames()
    out = [decode_to_worker(body) for piece in _cut(stream, cuts) for body in frames.feed(piece)]
    assert out == messages


@given(
    st.lists(st.builds(Done, id=st.integers(0, 2**62), result=results), max_size=8),
    st.lists(st.integers(0, 10**6), max_size=12),
)
def test_answers_from_a_worker_survive_any_cut(answers: list[Done], cuts: list[int]) -> None:
    stream = b"".join(frame(a) for a in answers)
    frames = Frames()
    out = [decode_done(body) for piece in _cut(stream, cuts) for body in frames.feed(piece)]
    assert out == answers
