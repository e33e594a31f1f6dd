"""Staged writes (docs/GUARANTEES.md, "Staged writes"): embedded, on S3 and over HTTP alike."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import brook
from brook.errors import BadRequest, InvalidName, NotStaged, PartitionNotFound
from brook.partitioner import partition_for_key
from brook.records import Published, Record


def everything(topic: Any, partitions: int) -> list[Record]:
    out = []
    for p in range(partitions):
        offset = 0
        while batch := topic.read(p, offset, 10_000):
            out.extend(batch)
            offset = batch[-1].offset + 1
    return out


def rows(count: int, copies: int = 1) -> list[Record]:
    """Records with repeats (identical rows must each be written once), some keyed."""
    return [
        Record(b"v%d" % i, key=b"k%d" % (i % 5) if i % 3 else None, headers={"n": b"%d" % i})
        for i in range(count)
        for _ in range(copies)
    ]


def test_a_publish_appends_what_the_named_parts_staged_once(broker: brook.Broker) -> None:
    broker.create_topic("out", partitions=3)
    t = broker.topic("out")
    staged = rows(300, copies=2)
    assert t.stage("query-1", 7, "task0-a", 0, staged[:250])
    assert t.stage("query-1", 7, "task0-a", 1, staged[250:])
    assert t.stage("query-1", 7, "task1-b", 0, staged[:5])  # a failed attempt's part
    assert sum(t.end_offsets().values()) == 0  # nothing readable before the publish
    assert t.publish("query-1", 7, {"task0-a": 2}) == Published(7, 600, replayed=False)
    got = everything(t, 3)
    assert Counter((r.value, r.key) for r in got) == Counter((r.value, r.key) for r in staged)
    for record in got:
        if record.key is not None:
            assert record.partition == partition_for_key(record.key, 3)
    assert {r.headers["n"] for r in got} == {b"%d" % i for i in range(300)}


def test_a_replayed_publish_or_stage_appends_nothing(broker: brook.Broker) -> None:
    t = broker.topic("out")
    assert t.stage("q", 0, "p", 0, rows(10))
    assert t.publish("q", 0, {"p": 1}).records == 10
    # The replay of micro-batch 0 after a driver crash: new tasks, new parts.
    assert not t.stage("q", 0, "p-again", 0, rows(10))
    assert t.publish("q", 0, {"p-again": 1}) == Published(0, 10, replayed=True)
    assert t.publish("q", 0, {}) == Published(0, 10, replayed=True)
    assert t.stage("q", 1, "p", 0, rows(3))
    assert t.publish("q", 1, {"p": 1}).records == 3
    assert t.publish("q", 0, {"p": 1}) == Published(0, None, replayed=True)
    assert not t.drop_staged("q", 1)
    assert sum(t.end_offsets().values()) == 13


def test_a_publish_of_chunks_never_staged_appends_nothing(broker: brook.Broker) -> None:
    t = broker.topic("out")
    t.stage("q", 0, "p", 0, rows(4))
    with pytest.raises(NotStaged, match="chunk 1 of seq 0 was never staged"):
        t.publish("q", 0, {"p": 2})
    with pytest.raises(NotStaged, match="never staged"):
        t.publish("q", 0, {"other": 1})
    assert sum(t.end_offsets().values()) == 0
    assert t.publish("q", 0, {"p": 1}).records == 4


def test_dropped_staging_is_gone_and_a_chunk_staged_again_replaces_itself(
    broker: brook.Broker,
) -> None:
    t = broker.topic("out")
    t.stage("w", 3, "p", 0, rows(4))
    assert t.drop_staged("w", 3)
    with pytest.raises(NotStaged, match="never staged"):
        t.publish("w", 3, {"p": 1})
    t.stage("w", 3, "p", 0, rows(4))
    t.stage("w", 3, "p", 0, rows(2))  # a resent request
    assert t.publish("w", 3, {"p": 1}).records == 2


def test_staged_records_may_ask_for_a_partition(broker: brook.Broker) -> None:
    broker.create_topic("out", partitions=4)
    t = broker.topic("out")
    t.stage("w", 0, "p", 0, rows(20), partition=2)
    with pytest.raises(PartitionNotFound):
        t.stage("w", 0, "p", 1, rows(1), partition=4)
    t.publish("w", 0, {"p": 1})
    assert t.end_offsets() == {0: 0, 1: 0, 2: 20, 3: 0}


def test_unkeyed_records_of_a_chunk_go_to_one_partition(broker: brook.Broker) -> None:
    broker.create_topic("out", partitions=4)
    t = broker.topic("out")
    for chunk in range(8):
        t.stage("w", 0, "p", chunk, [Record(b"x")] * 10)
    t.publish("w", 0, {"p": 8})
    assert all(n % 10 == 0 for n in t.end_offsets().values())
    assert sum(t.end_offsets().values()) == 80


def test_bad_staging_input_is_refused_with_its_reason(broker: brook.Broker) -> None:
    t = broker.topic("out")
    with pytest.raises(BadRequest, match="writer must be"):
        t.stage("has space", 0, "p", 0, rows(1))
    with pytest.raises(BadRequest, match="part must be"):
        t.stage("w", 0, "a/b", 0, rows(1))
    with pytest.raises(BadRequest, match="seq"):
        t.stage("w", -1, "p", 0, rows(1))
    with pytest.raises(BadRequest, match="chunk"):
        t.stage("w", 0, "p", -2, rows(1))
    with pytest.raises(BadRequest):
        t.publish("w", 0, {"p": -1})
    with pytest.raises(BadRequest):
        t.publish("w", 0, {"p/q": 1})
    with pytest.raises(InvalidName):
        broker.topic("__internal")
    with pytest.raises(BadRequest):
        t.stage("w", 0, "p", 0, [Record("text")])  # type: ignore[arg-type]


def test_deleting_a_topic_drops_its_staging_and_writers(broker: brook.Broker) -> None:
    t = broker.topic("out")
    t.stage("w", 0, "p", 0, rows(3))
    t.publish("w", 0, {"p": 1})
    t.stage("w", 1, "p", 0, rows(3))
    broker.delete_topic("out")
    t = broker.topic("out")
    with pytest.raises(NotStaged, match="never staged"):
        t.publish("w", 1, {"p": 1})
    assert t.stage("w", 0, "p", 0, rows(2))  # the writer's history went with the topic
    assert t.publish("w", 0, {"p": 1}).records == 2
