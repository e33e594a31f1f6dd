"""The broker's joins, embedded on a directory: members counted from their queue
groups once each, the continuation appended once across restarts, failures passed
down a chain, and every bad request refused with nothing made."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import msgspec
import pytest

import brook
from brook import join_headers
from brook.errors import (
    BadRequest,
    Conflict,
    JoinNotFound,
    PartitionNotFound,
    ReadOnly,
    TopicNotFound,
)
from brook.models import JoinContinuation, JoinMember, JoinSpec
from tests.waiting import slow, wait_for


def _members(acks: list[brook.Ack], topic: str = "t") -> list[JoinMember]:
    return [
        JoinMember(topic=topic, group="g", partition=a.partition, offset=a.offset) for a in acks
    ]


def _then(topic: str = "out", value: bytes = b"callback") -> JoinContinuation:
    return JoinContinuation(topic=topic, group="g", value=value)


def _ack_all(q: brook.Queue, count: int, result: bytes = b"r") -> list[int]:
    done: list[int] = []
    while len(done) < count:
        jobs = q.lease(count, timeout=slow(5))
        assert jobs, f"only {len(done)} of {count} jobs came"
        q.ack(jobs, results=[result + str(j.record.offset).encode() for j in jobs])
        done.extend(j.record.offset for j in jobs)
    return done


def _records(b: brook.Broker, topic: str) -> list[brook.Record]:
    if topic not in {t.name for t in b.topics()}:
        return []
    return b.topic(topic).read(0, 0, 1000)


def test_a_chord_appends_its_record_once_with_the_results_in_member_order(tmp_path: Path) -> None:
    with brook.open(tmp_path) as b:
        acks = b.topic("t").append_many([brook.Record(f"m{i}".encode()) for i in range(5)])
        q = b.queue("t", "g")
        [made] = b.create_joins([JoinSpec(id="c1", members=_members(acks[::-1]), then=_then())])
        assert (made.state, made.members, made.arrived) == ("open", 5, 0)
        _ack_all(q, 5)
        info = b.join("c1", timeout=slow(10))
        assert (info.state, info.arrived, info.partition, info.offset) == ("fired", 5, 0, 0)
        [record] = _records(b, "out")
        assert record.value == b"callback" and record.headers is not None
        assert record.headers[join_headers.JOIN] == b"c1"
        outcomes = join_headers.decode_results(record.headers[join_headers.RESULTS])
        assert outcomes == [(True, b"r%d" % i, f"t/0/{i}") for i in (4, 3, 2, 1, 0)]
    with brook.open(tmp_path) as b:  # a restart decides nothing again
        assert b.join("c1").state == "fired"
        assert len(_records(b, "out")) == 1


def test_members_acked_before_a_restart_count_after_it(tmp_path: Path) -> None:
    with brook.open(tmp_path) as b:
        acks = b.topic("t").append_many([brook.Record(b"m")] * 4)
        q = b.queue("t", "g")
        b.create_joins([JoinSpec(id="c2", members=_members(acks), then=_then())])
        jobs = q.lease(2, timeout=slow(5))
        q.ack(jobs, results=[b"a", b"b"])
    with brook.open(tmp_path) as b:
        assert b.join("c2").state == "open"
        _ack_all(b.queue("t", "g"), 2)
        assert b.join("c2", timeout=slow(10)).state == "fired"
        assert len(_records(b, "out")) == 1


def test_a_broker_killed_after_the_acks_appends_the_record_once(tmp_path: Path) -> None:
    """The members' acks are durable, the join's file may not say so yet, the timer may
    or may not be scheduled: whatever the moment of the kill, one record in the end."""
    child = textwrap.dedent(
        f"""
        import os, sys, time, brook
        from brook.models import JoinContinuation, JoinMember, JoinSpec
        b = brook.open({str(tmp_path)!r})
        acks = b.topic("t").append_many([brook.Record(b"m")] * 3)
        q = b.queue("t", "g")
        members = [JoinMember(topic="t", group="g", partition=a.partition, offset=a.offset)
                   for a in acks]
        then = JoinContinuation(topic="out", group="g", value=b"cb")
        b.create_joins([JoinSpec(id="k", members=members, then=then)])
        jobs = q.lease(3, timeout=5)
        q.ack(jobs, results=[b"x", b"y", b"z"])
        time.sleep(float(sys.argv[1]))
        os._exit(0)
        """
    )
    for delay in (0.0, 0.001, 0.005, 0.02):
        data = tmp_path
        for stale in data.glob("*"):
            subprocess.run(["rm", "-rf", str(stale)], check=True)
        subprocess.run([sys.executable, "-c", child, str(delay)], check=True, timeout=slow(60))
        with brook.open(data) as b:
            assert b.join("k", timeout=slow(10)).state == "fired", delay
            [record] = _records(b, "out")
            assert record.headers is not None
            outcomes = join_headers.decode_results(record.headers[join_headers.RESULTS])
            assert [o[1] for o in outcomes] == [b"x", b"y", b"z"], delay


def test_a_dead_member_fails_the_join_and_the_joins_after_it(tmp_path: Path) -> None:
    with brook.open(tmp_path) as b:
        [first] = b.topic("t").append_many([brook.Record(b"a")])
        q = b.queue("t", "g")
        b.create_joins(
            [
                JoinSpec(id="l1", members=_members([first]), then=_then("t2")),
                JoinSpec(
                    id="l2",
                    members=[JoinMember(topic="t2", group="g", join="l1")],
                    then=_then("t3"),
                    on_error=JoinContinuation(topic="errs", group="g", value=b"eb"),
                ),
            ]
        )
        [job] = q.lease(1, timeout=slow(5))
        q.discard([job], reason="ValueError: bad input")
        one, two = b.join("l1", timeout=slow(10)), b.join("l2", timeout=slow(10))
        assert (one.state, one.error, one.failed_ref) == (
            "failed",
            "ValueError: bad input",
            "t/0/0",
        )
        assert (two.state, two.error, two.failed_ref) == (
            "failed",
            "ValueError: bad input",
            "t/0/0",
        )
        assert _records(b, "t2") == [] and _records(b, "t3") == []
        wait_for(lambda: _records(b, "errs"), what="the on_error record")
        [errback] = _records(b, "errs")
        assert errback.headers is not None
        assert errback.headers[join_headers.FAILED] == b"t/0/0"
        assert errback.headers[join_headers.ERROR] == b"ValueError: bad input"


def test_a_chain_moves_link_by_link_and_a_late_group_is_watched(tmp_path: Path) -> None:
    with brook.open(tmp_path) as b:
        [first] = b.topic("a").append_many([brook.Record(b"1")])
        b.create_joins(
            [
                JoinSpec(id="s1", members=_members([first], "a"), then=_then("b", b"2")),
                JoinSpec(
                    id="s2", members=[JoinMember(topic="b", group="g", join="s1")], then=_then("c")
                ),
            ]
        )
        _ack_all(b.queue("a", "g"), 1)  # the group is made after the joins
        assert b.join("s1", timeout=slow(10)).state == "fired"
        assert b.join("s2").state == "open"
        _ack_all(b.queue("b", "g"), 1, result=b"second")
        info = b.join("s2", timeout=slow(10))
        assert info.state == "fired"
        [last] = _records(b, "c")
        assert last.headers is not None
        [(ok, data, ref)] = join_headers.decode_results(last.headers[join_headers.RESULTS])
        assert (ok, data, ref) == (True, b"second0", "b/0/0")


def test_results_too_large_for_one_record_fail_the_join(tmp_path: Path) -> None:
    with brook.open(tmp_path, record_bytes_max=4096) as b:
        acks = b.topic("t").append_many([brook.Record(b"m")] * 3)
        q = b.queue("t", "g")
        b.create_joins([JoinSpec(id="big", members=_members(acks), then=_then())])
        _ack_all(q, 3, result=b"x" * 2000)
        info = b.join("big", timeout=slow(10))
        assert info.state == "failed" and "more than the broker's record_bytes_max" in info.error


def test_members_of_a_deleted_topic_fail_the_join(tmp_path: Path) -> None:
    with brook.open(tmp_path) as b:
        acks = b.topic("gone").append_many([brook.Record(b"m")])
        b.create_joins([JoinSpec(id="d", members=_members(acks, "gone"), then=_then())])
        b.delete_topic("gone")
        info = b.join("d", timeout=slow(10))
        assert (info.state, info.error) == ("failed", "topic gone was deleted")


def test_bad_joins_are_refused_and_nothing_is_made(tmp_path: Path) -> None:
    with brook.open(tmp_path) as b:
        acks = b.topic("t").append_many([brook.Record(b"m")] * 2)
        good = JoinSpec(id="ok", members=_members(acks), then=_then())
        b.create_joins([good])
        assert b.create_joins([good])[0].id == "ok"  # the same again: nothing new
        with pytest.raises(Conflict, match="exists with another definition"):
            b.create_joins([JoinSpec(id="ok", members=_members(acks[:1]), then=_then())])
        bad = [
            (JoinSpec(id="e", members=[], then=_then()), "give 1 to 10000 members"),
            (JoinSpec(id="bad id!", members=_members(acks), then=_then()), "join id"),
            (
                JoinSpec(id="two", members=_members(acks[:1] * 2), then=_then()),
                "a member is named twice",
            ),
            (
                JoinSpec(id="n", members=[JoinMember(topic="t", group="g", join="nope")]),
                "names no join",
            ),
            (
                JoinSpec(id="p", members=[JoinMember(topic="t", group="g")], then=_then()),
                "partition and offset",
            ),
            (
                JoinSpec(id="x", members=_members(acks), then=_then("__internal")),
                "reserved",
            ),
        ]
        for spec, message in bad:
            with pytest.raises(BadRequest, match=message):
                b.create_joins([good, spec])
        with pytest.raises(BadRequest, match="not a join"):
            b.create_joins([{"id": "d", "members": "all"}])  # type: ignore[list-item]
        with pytest.raises(BadRequest, match="at least one join"):
            b.create_joins([])
        for spec, _ in bad:
            with pytest.raises(JoinNotFound):
                b.join(spec.id)
    with brook.open(tmp_path, read_only=True) as reader:
        assert reader.join("ok").state == "open"
        with pytest.raises(ReadOnly):
            reader.create_joins([good])


def test_members_must_be_records_that_exist(tmp_path: Path) -> None:
    with brook.open(tmp_path) as b:
        [ack] = b.topic("t").append_many([brook.Record(b"m")])
        member = _members([ack])[0]
        for wrong, error, message in [
            (msgspec.structs.replace(member, partition=7), PartitionNotFound, "no partition 7"),
            (msgspec.structs.replace(member, offset=1), BadRequest, "past the end of partition"),
            (msgspec.structs.replace(member, topic="nowhere"), TopicNotFound, "nowhere"),
        ]:
            with pytest.raises(error, match=message):
                b.create_joins([JoinSpec(id="w", members=[wrong], then=_then())])
        twice = [JoinSpec(id="d", members=[member], then=_then())] * 2
        with pytest.raises(BadRequest, match="named twice in one call"):
            b.create_joins(twice)
        with pytest.raises(JoinNotFound):
            b.join("w")


def test_a_member_whose_partition_went_fails_alone(tmp_path: Path) -> None:
    """A topic deleted and made again with fewer partitions: its member arrives failed,
    and the joins waiting on other groups are not held up by it."""
    with brook.open(tmp_path) as b:
        b.create_topic("wide", partitions=3)
        gone = b.topic("wide").append_many([brook.Record(b"x")], partition=2)
        kept = b.topic("t").append_many([brook.Record(b"y")])
        b.queue("wide", "g")
        b.create_joins(
            [
                JoinSpec(id="lost", members=_members(gone, "wide"), then=_then()),
                JoinSpec(id="fine", members=_members(kept), then=_then()),
            ]
        )
        b.delete_topic("wide")
        b.create_topic("wide", partitions=1)
        b.queue("wide", "g")
        _ack_all(b.queue("t", "g"), 1)
        assert b.join("fine", timeout=slow(10)).state == "fired"
        assert b.join("lost", timeout=slow(10)).state == "failed"


def test_a_join_made_just_before_a_kill_is_known_after_it(tmp_path: Path) -> None:
    """Made durable in its create's commit round (the join log), before its file is
    written: a broker killed at once still knows the join when it starts again."""
    child = textwrap.dedent(
        f"""
        import os, brook
        from brook.models import JoinContinuation, JoinMember, JoinSpec
        b = brook.open({str(tmp_path)!r})
        acks = b.topic("t").append_many([brook.Record(b"m")] * 2)
        b.queue("t", "g")
        members = [JoinMember(topic="t", group="g", partition=a.partition, offset=a.offset)
                   for a in acks]
        then = JoinContinuation(topic="out", group="g", value=b"cb")
        b.create_joins([JoinSpec(id="early", members=members, then=then)])
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", child], check=True, timeout=slow(60))
    with brook.open(tmp_path) as b:
        assert b.join("early").state == "open"
        _ack_all(b.queue("t", "g"), 2)
        assert b.join("early", timeout=slow(10)).state == "fired"
        b.core.call(b.core.maintain)  # the log behind the files may go
    with brook.open(tmp_path) as b:
        assert b.join("early").state == "fired"
        assert len(_records(b, "out")) == 1


def test_maintenance_never_waits_for_the_joins_lock(tmp_path: Path) -> None:
    """The loop holds its lock while it waits for a commit round, which the committer's
    writer must write: the writer's maintenance must never wait for that lock (chaos
    seed 1 found the broker's every write stalled so)."""
    with brook.open(tmp_path) as b:
        done = threading.Event()
        with b.joins.mutex:
            runner = threading.Thread(target=lambda: (b.core.call(b.core.maintain), done.set()))
            runner.start()
            assert done.wait(slow(10)), "maintenance waited for the joins' lock"
        runner.join()
