"""A partition's first offset at or after a time, from the segments' indexes (the
dashboard's "records from this time")."""

from __future__ import annotations

from pathlib import Path

import brook


def test_the_first_offset_stamped_at_or_after_a_time(tmp_path: Path) -> None:
    now = [1_000.0]
    with brook.open(str(tmp_path), segment_bytes_max=300, clock=lambda: now[0]) as b:
        firsts = []
        for second in range(10):  # ten batches of five, a second apart, over several segments
            now[0] = 1_000.0 + second
            acks = b.topic("t").append_many([brook.Record(b"v" * 20) for _ in range(5)])
            firsts.append(acks[0].offset)
        log = b.core.topic_state("t").logs[0]
        assert len(log.segments) > 2
        assert log.offset_at(0) == 0
        for second, first in enumerate(firsts):
            at = int((1_000.0 + second) * 1000)
            assert log.offset_at(at) == first
            assert log.offset_at(at - 500) == first  # between two batches: the later one
        assert log.offset_at(int(1_010.0 * 1000)) == log.durable_offset  # after the last
