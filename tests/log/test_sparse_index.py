"""The sparse segment index (log/segment.py): a batch is listed only every
limits.index_interval_bytes, yet reads from any offset, the first offset at a time,
retention's view of a segment's newest record and the idempotency window are exact,
in the active segment, after a seal and after a recovery scan."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

import brook
from brook import limits

BATCHES = st.lists(
    st.tuples(st.integers(1, 6), st.integers(1, 700), st.integers(0, 30)),  # records, bytes, +s
    min_size=20,
    max_size=90,
)


@settings(max_examples=12, deadline=None)
@given(batches=BATCHES)
def test_lookups_are_exact_over_a_sparse_index(batches: list[tuple[int, int, int]]) -> None:
    now = [1_000.0]
    stamps: list[tuple[int, int]] = []  # (first offset, timestamp ms) of each batch
    values: list[bytes] = []
    with tempfile.TemporaryDirectory() as folder:
        with brook.open(folder, segment_bytes_max=40_000, clock=lambda: now[0]) as b:
            for n, (count, size, step) in enumerate(batches):
                now[0] += step
                records = [brook.Record(bytes([65 + n % 26]) * size) for _ in range(count)]
                keys = [f"k{n}.{i}" for i in range(count)]
                acks = b.topic("t").append_many(records, idempotency_keys=keys)
                stamps.append((acks[0].offset, acks[0].timestamp))
                values.extend(r.value for r in records)
            check(b, stamps, values, len(batches))
        now[0] += 1
        with brook.open(folder, segment_bytes_max=40_000, clock=lambda: now[0]) as b:
            check(b, stamps, values, len(batches))  # sealed from seals, active by recovery
            window_start = int(now[0] * 1000) - limits.idempotency_window_ms_default + 1000
            for n, (first, stamp) in enumerate(stamps):
                if stamp >= window_start:  # every key within the window is remembered
                    retried = b.topic("t").append(b"again", idempotency_key=f"k{n}.0")
                    assert retried.offset == first


def check(b: brook.Broker, stamps: list[tuple[int, int]], values: list[bytes], n: int) -> None:
    log = b.core.topic_state("t").logs[0]
    stored = sum(s.durable_bytes for s in log.segments)
    listed = sum(len(s.positions) for s in log.segments)
    assert listed <= stored // limits.index_interval_bytes + 2 * len(log.segments)
    for offset in range(0, len(values), 7):
        got = b.topic("t").read(0, offset, 3)
        assert [r.offset for r in got] == list(range(offset, min(offset + 3, len(values))))
        assert [r.value for r in got] == values[offset : offset + 3]
    for _, stamp in stamps:
        for at in (stamp - 1, stamp, stamp + 1):
            expected = next((o for o, s in stamps if s >= at), log.durable_offset)
            assert log.offset_at(at) == expected
    for segment in log.segments:
        newest = max(s for o, s in stamps if segment.base_offset <= o < segment.next_offset)
        assert segment.max_timestamp == newest, "retention must see a segment's newest batch"
