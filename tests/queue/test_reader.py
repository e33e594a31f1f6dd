"""The batches queue groups read are shared: a record fanned out to many groups (a
thousand endpoints) is read from storage about once, within a bound in bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import brook
from brook.queue.reader import BatchCache, _Batches
from brook.records import Record


def test_fifty_groups_read_a_topic_about_once_and_each_gets_every_record(
    tmp_path: Path,
) -> None:
    with brook.open(str(tmp_path)) as b:
        values = [b"record %d" % i for i in range(300)]
        b.topic("events").append_many([Record(v) for v in values[:150]])
        b.topic("events").append_many([Record(v) for v in values[150:]])
        for n in range(50):
            queue = b.queue("events", f"customer-{n}")
            got = []
            while jobs := queue.lease(max_records=64, timeout=0):
                got += [j.record.value for j in jobs]
                queue.ack(jobs)
            assert got == values, f"group {n}"
        assert b.queues.batches.reads <= 2, "read once, not once per group"


def test_a_topic_made_again_under_its_name_is_read_afresh(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        b.topic("t").append_many([Record(b"old %d" % i) for i in range(5)])
        assert [j.record.value for j in b.queue("t", "g").lease(max_records=10)] == [
            b"old %d" % i for i in range(5)
        ]
        b.delete_topic("t")
        b.topic("t").append_many([Record(b"new %d" % i) for i in range(5)])
        assert [j.record.value for j in b.queue("t", "g").lease(max_records=10)] == [
            b"new %d" % i for i in range(5)
        ]


def test_what_is_kept_stays_within_its_bound(tmp_path: Path) -> None:
    """The bound is the broker's setting (queue_batches_bytes_max, brook serve's flag too)."""
    with brook.open(str(tmp_path), queue_batches_bytes_max=20_000) as b:
        for t in range(10):
            b.topic(f"t{t}").append_many([Record(bytes(1_000)) for _ in range(8)])
            assert len(b.queue(f"t{t}", "g").lease(max_records=8)) == 8
            assert b.queues.batches.bytes <= 20_000
        assert b.queues.batches.reads == 10


@dataclass(frozen=True)
class FakeLog:
    topic: str
    partition: int = 0
    serial: int = field(default=0)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "find", "forget"]),
            st.integers(0, 2),
            st.integers(0, 60),
            st.integers(1, 20),
        ),
        max_size=60,
    )
)
def test_the_cache_finds_only_what_holds_the_offset_and_keeps_its_bound(
    steps: list[tuple[str, int, int, int]],
) -> None:
    cache = BatchCache(bytes_max=100)
    logs = [FakeLog("a"), FakeLog("a", 1), FakeLog("b")]
    for action, which, offset, length in steps:
        log = logs[which]
        if action == "add":
            cache.add(log, _Batches(offset, offset + length, bytes(length * 5)))  # type: ignore[arg-type]
        elif action == "find":
            found = cache.find(log, offset)  # type: ignore[arg-type]
            assert found is None or found.first <= offset < found.end
        else:
            cache.forget(log.topic)
            assert all(
                cache.find(other, o) is None
                for other in logs
                if other.topic == log.topic
                for o in range(81)
            )  # type: ignore[arg-type]
        assert cache.bytes <= 100 or len(cache._held) == 1
        assert cache.bytes == sum(len(b.raw) for b in cache._held.values())
