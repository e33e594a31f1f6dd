"""The broker API of SPEC §3: embedded (disk, memory) and remote (HTTP) pass the same tests."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import crc32c
import pytest

import brook
from brook import limits
from brook.errors import (
    BadRequest,
    Closed,
    Conflict,
    InvalidName,
    Locked,
    PartitionNotFound,
    RecordTooLarge,
    TopicNotFound,
)
from brook.records import Record


def test_append_read_round_trip_with_keys_and_headers(broker: brook.Broker) -> None:
    t = broker.topic("orders")
    ack = t.append(b"v0", key=b"k", headers={"h": b"1"})
    assert (ack.partition, ack.offset) == (0, 0) and ack.timestamp > 0
    acks = t.append_many([Record(b"v1"), Record(b"v2", key=b"k2"), Record(b"", headers={"a": b""})])
    assert [a.offset for a in acks] == [1, 2, 3]
    got = t.read(partition=0, offset=0, limit=10)
    assert [(r.value, r.key, r.headers) for r in got] == [
        (b"v0", b"k", {"h": b"1"}),
        (b"v1", None, None),
        (b"v2", b"k2", None),
        (b"", None, {"a": b""}),
    ]
    assert all(r.topic == "orders" and r.partition == 0 for r in got)
    assert [r.offset for r in t.read(0, 2, 1)] == [2]
    assert t.read(0, 4) == []
    assert t.end_offsets() == {0: 4}


def test_topics_create_list_describe_delete(broker: brook.Broker) -> None:
    info = broker.create_topic("events", partitions=3, retention_ms=60_000)
    assert (info.name, info.partitions, info.retention_ms, info.end_offsets) == (
        "events",
        3,
        60_000,
        {0: 0, 1: 0, 2: 0},
    )
    assert broker.create_topic("events", partitions=3, retention_ms=60_000) == info
    with pytest.raises(Conflict):
        broker.create_topic("events", partitions=4)
    broker.topic("other").append(b"x")
    assert [t.name for t in broker.topics()] == ["events", "other"]
    broker.delete_topic("events")
    assert [t.name for t in broker.topics()] == ["other"]
    with pytest.raises(TopicNotFound):
        broker.delete_topic("events")
    with pytest.raises(TopicNotFound):
        broker.topic("events").read()


@pytest.mark.parametrize("name", ["", "a b", "x/y", "__internal", "é", "a" * 201, ".", "..", 7])
def test_invalid_topic_names_are_refused(broker: brook.Broker, name: object) -> None:
    with pytest.raises(InvalidName):
        broker.create_topic(name)  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        broker.topic(name).append(b"x")  # type: ignore[arg-type]


def test_bad_input_is_a_clear_error(broker: brook.Broker) -> None:
    t = broker.topic("t")
    t.append(b"x")
    with pytest.raises(BadRequest, match="value must be bytes"):
        t.append("text")  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match="key must be bytes"):
        t.append(b"x", key=5)  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match="header"):
        t.append(b"x", headers={"h": "not bytes"})  # type: ignore[dict-item]
    with pytest.raises(RecordTooLarge):
        t.append(b"x" * (limits.record_bytes_max_default + 1))
    with pytest.raises(BadRequest):
        t.read(0, -1)
    with pytest.raises(BadRequest):
        t.read(0, 0, limit=-5)
    with pytest.raises(PartitionNotFound):
        t.read(partition=1)
    with pytest.raises(BadRequest):
        broker.create_topic("p", partitions=0)
    with pytest.raises(BadRequest):
        t.append_many([b"not a record"])  # type: ignore[list-item]
    assert t.end_offsets() == {0: 1}, "nothing of a refused call was appended"


def test_limit_is_capped_not_rejected(broker: brook.Broker) -> None:
    t = broker.topic("t")
    t.append_many([Record(b"x")] * (limits.read_records_max + 5))
    assert len(t.read(0, 0, limit=10**9)) == limits.read_records_max


def test_keyed_records_go_to_their_keys_partition(broker: brook.Broker) -> None:
    broker.create_topic("k", partitions=4)
    t = broker.topic("k")
    for key in [b"alice", b"bob", b"carol", b"dave", b"alice"]:
        ack = t.append(b"v", key=key)
        assert ack.partition == crc32c.crc32c(key) % 4


def test_unkeyed_records_are_spread_evenly(broker: brook.Broker) -> None:
    broker.create_topic("s", partitions=4)
    for _ in range(40):
        broker.topic("s").append(b"v")
    assert broker.topic("s").end_offsets() == {0: 10, 1: 10, 2: 10, 3: 10}


def test_append_many_across_partitions_returns_acks_in_input_order(broker: brook.Broker) -> None:
    broker.create_topic("m", partitions=3)
    records = [Record(f"{i}".encode(), key=f"key{i}".encode()) for i in range(30)]
    acks = broker.topic("m").append_many(records)
    for record, ack in zip(records, acks, strict=True):
        assert ack.partition == crc32c.crc32c(record.key) % 3
        stored = broker.topic("m").read(ack.partition, ack.offset, 1)[0]
        assert stored.value == record.value


def test_append_many_to_a_chosen_partition(broker: brook.Broker) -> None:
    broker.create_topic("chosen", partitions=3)
    t = broker.topic("chosen")
    acks = t.append_many([Record(b"a", key=b"k"), Record(b"b")], partition=2)
    assert [(a.partition, a.offset) for a in acks] == [(2, 0), (2, 1)]
    assert [r.value for r in t.read(partition=2)] == [b"a", b"b"]
    with pytest.raises(PartitionNotFound):
        t.append_many([Record(b"c")], partition=3)
    with pytest.raises(BadRequest):
        t.append_many([Record(b"c")], partition=-1)
    assert t.end_offsets() == {0: 0, 1: 0, 2: 2}


def test_idempotency_keys_append_once(broker: brook.Broker) -> None:
    t = broker.topic("t")
    first = t.append(b"charge", idempotency_key="order-1")
    again = t.append(b"charge", idempotency_key="order-1")
    assert again == first
    many = t.append_many(
        [Record(b"a"), Record(b"b"), Record(b"c")], idempotency_keys=["x", "order-1", "x"]
    )
    assert many[1] == first and many[0] == many[2]
    assert t.end_offsets() == {0: 2}
    broker.topic("other").append(b"charge", idempotency_key="order-1")
    assert broker.topic("other").end_offsets() == {0: 1}, "keys are per topic"


def test_concurrent_appends_get_dense_unique_offsets(broker: brook.Broker) -> None:
    t = broker.topic("t")
    offsets: list[int] = []
    lock = threading.Lock()

    def produce(worker: int) -> None:
        for i in range(50):
            ack = t.append(f"{worker}-{i}".encode())
            with lock:
                offsets.append(ack.offset)

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(offsets) == list(range(400))
    assert len({r.value for r in t.read(0, 0, 1000)}) == 400


def test_stream_group_poll_commit_lag_and_seek(broker: brook.Broker) -> None:
    t = broker.topic("t")
    t.append_many([Record(f"{i}".encode()) for i in range(10)])
    c = broker.consumer("t", group="billing")
    assert c.lag() == {0: 10}
    assert [r.offset for r in c.poll(max_records=4, timeout=0)] == [0, 1, 2, 3]
    assert c.lag() == {0: 10}, "lag counts what is not yet committed"
    c.commit()
    assert c.lag() == {0: 6}
    assert [r.offset for r in c.poll(timeout=0)] == [4, 5, 6, 7, 8, 9]
    assert c.poll(timeout=0) == []
    c.seek(0, 2)
    assert c.poll(max_records=1, timeout=0)[0].offset == 2
    with pytest.raises(PartitionNotFound):
        c.seek(3, 0)


def test_consumers_of_one_group_share_its_records(broker: brook.Broker) -> None:
    broker.topic("t").append_many([Record(f"{i}".encode()) for i in range(6)])
    a = broker.consumer("t", "g")
    b = broker.consumer("t", "g")
    first = a.poll(max_records=3, timeout=0)
    second = b.poll(max_records=3, timeout=0)
    assert [r.offset for r in first + second] == list(range(6))
    other = broker.consumer("t", "another")
    assert len(other.poll(timeout=0)) == 6


def test_poll_waits_for_new_records(broker: brook.Broker) -> None:
    broker.create_topic("t")
    c = broker.consumer("t", "g", start="latest")
    timer = threading.Timer(0.05, lambda: broker.topic("t").append(b"late"))
    timer.start()
    got = c.poll(timeout=5)
    timer.join()
    assert [r.value for r in got] == [b"late"]


def test_a_new_group_may_start_at_the_end(broker: brook.Broker) -> None:
    broker.topic("t").append(b"old")
    c = broker.consumer("t", "g", start="latest")
    assert c.poll(timeout=0) == []
    broker.topic("t").append(b"new")
    assert [r.value for r in c.poll(timeout=0)] == [b"new"]
    with pytest.raises(BadRequest):
        broker.consumer("t", "h", start="middle")
    with pytest.raises(TopicNotFound):
        broker.consumer("missing", "g")


def test_group_positions_and_records_survive_reopening(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        b.create_topic("t", partitions=2)
        b.topic("t").append_many([Record(f"{i}".encode(), key=f"{i}".encode()) for i in range(20)])
        c = b.consumer("t", "g")
        polled = c.poll(max_records=7, timeout=0)
        c.commit()
        c.poll(max_records=5, timeout=0)  # not committed: redelivered after restart
    with brook.open(str(tmp_path)) as b:
        c = b.consumer("t", "g")
        rest = c.poll(max_records=100, timeout=0)
        assert len(polled) + len(rest) == 20
        assert {(r.partition, r.offset) for r in polled}.isdisjoint(
            {(r.partition, r.offset) for r in rest}
        )
        assert b.topics()[0].partitions == 2


def test_idempotency_survives_reopening(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        first = b.topic("t").append(b"once", idempotency_key=b"k1")
    with brook.open(str(tmp_path)) as b:
        assert b.topic("t").append(b"once", idempotency_key=b"k1") == first
        assert b.topic("t").end_offsets() == {0: 1}


def test_a_second_broker_on_one_directory_is_locked_out(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)):
        with pytest.raises(Locked):
            brook.open(str(tmp_path))
        code = f"import brook\ntry:\n    brook.open({str(tmp_path)!r})\nexcept brook.errors.Locked:\n    raise SystemExit(7)\n"
        assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 7
    with brook.open(str(tmp_path)) as b:  # released on close
        assert b.topics() == []


def test_a_closed_broker_refuses_work(tmp_path: Path) -> None:
    b = brook.open(str(tmp_path))
    t = b.topic("t")
    b.close()
    b.close()
    with pytest.raises(Closed):
        t.append(b"x")
    with pytest.raises(Closed):
        b.topics()


def test_unsupported_locations_are_refused() -> None:
    with pytest.raises(BadRequest):
        brook.open("ftp://somewhere")


def test_an_append_racing_a_topic_delete_gets_topic_not_found(embedded: brook.Broker) -> None:
    broker = embedded
    from brook.codec.batch import Columns
    from brook.commit import AppendRequest

    broker.topic("doomed").append(b"x")
    stale_log = broker.core.topic_state("doomed").logs[0]
    broker.delete_topic("doomed")
    with pytest.raises(TopicNotFound, match="was deleted"):
        broker.core.committer.append(AppendRequest(stale_log, Columns([b"late"], size_bytes=4)))
    assert broker.topic("doomed").append(b"again").offset == 0, "the name can be used again"


@pytest.mark.parametrize(
    "option",
    [
        {"linger_ms": -1},
        {"linger_ms": "2"},
        {"batch_bytes_max": 0},
        {"segment_bytes_max": 1.5},
        {"segment_ms_max": 0},
    ],
)
def test_bad_broker_options_are_refused(option: dict[str, object]) -> None:
    with pytest.raises(BadRequest):
        brook.open("memory://", **option)


def test_each_broker_keeps_its_own_record_size_limit(tmp_path: Path) -> None:
    """record_bytes_max is a broker's setting, not the process's: two brokers in one
    process each hold records to their own limit, on appends, timers and batches."""
    with (
        brook.open(tmp_path / "small", record_bytes_max=1000) as small,
        brook.open(
            tmp_path / "large", record_bytes_max=limits.record_bytes_max_default * 2
        ) as large,
    ):
        small.topic("t").append(b"x" * 1000)
        with pytest.raises(RecordTooLarge, match=r"record_bytes_max \(1000\)"):
            small.topic("t").append(b"x" * 1001)
        with pytest.raises(RecordTooLarge):
            small.topic("t").append_many([Record(b"x" * 1001)])
        with pytest.raises(RecordTooLarge):
            small.schedule("t", b"x" * 1001, delay_ms=60_000)
        big = b"x" * (limits.record_bytes_max_default + 1)
        ack = large.topic("t").append(big)
        assert large.topic("t").read(ack.partition, ack.offset, 1)[0].value == big
        assert small.record_bytes_max == 1000


@pytest.mark.parametrize("size", [0, -1, limits.record_bytes_max_ceiling + 1, "8MiB", True])
def test_a_record_size_limit_out_of_bounds_is_refused(tmp_path: Path, size: object) -> None:
    with pytest.raises(BadRequest, match="record_bytes_max"):
        brook.open(tmp_path / "d", record_bytes_max=size)
