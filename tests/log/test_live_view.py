"""Readers of live logs beside their writer (SPEC §0: a read of a live log never fails
as `corrupt_data` because it raced a writer).

An outside fuzzer found `GET /v1/lake` answering 503 `corrupt_data` while it leased and
settled in a queue group, and 97 of 160 times after deleting a topic and making it
again: the views kept between calls (of the topic and of its groups' status logs)
applied what they had learned of the old log to the new one. Here hypothesis drives a
live broker through appends, leases and settlements (status-log entries), snapshots,
status segments deleted behind them, rolls, and topics deleted and made again, with
readers that keep their views across all of it: an outside view of the directory (as
Spark's), an outside lake watch (as `brook lake status` beside a broker), and the
broker's own (`GET /v1/lake`). Each must read exactly what was acknowledged.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import brook
from brook.lake.status import LakeWatch
from brook.log.view import TopicView, read_records
from brook.records import Record
from brook.storage.location import open_reader

TOPIC = "t"
GROUP = "g"


def _values(view: TopicView) -> list[bytes]:
    """Every record value the view reads, in offset order (one partition)."""
    start, end = view.bounds()[0]
    pieces = view.slices({0: start}, {0: end}, 300)
    return [record.value for piece in pieces for record in read_records(view.storage, piece)]


class LiveReaders(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="brook-live-view-")
        self.b = brook.open(self.dir, segment_bytes_max=700)
        self.made = 0  # incarnations of the topic, so each one's values differ
        self.values: list[bytes] = []
        self.outside = open_reader(self.dir)
        self.view: TopicView | None = None
        self.watch = LakeWatch(self.outside)
        self._append(1)

    def _append(self, count: int) -> None:
        new = [b"%d-%d-%s" % (self.made, len(self.values) + i, b"x" * 40) for i in range(count)]
        self.b.topic(TOPIC).append_many([Record(v) for v in new])
        self.values.extend(new)

    @rule(count=st.integers(1, 6))
    def append(self, count: int) -> None:
        self._append(count)

    @rule(count=st.integers(1, 4), settle=st.sampled_from(["ack", "nack", "discard"]))
    def lease_and_settle(self, count: int, settle: str) -> None:
        q = self.b.queue(TOPIC, GROUP, backoff={"min_ms": 1, "max_ms": 2})
        jobs = q.lease(count, timeout=0)
        if jobs:
            getattr(q, settle)(jobs)

    @rule()
    def snapshot_and_drop_behind_it(self) -> None:
        group = self.b.queues.find(TOPIC, GROUP)
        if group is None:
            return
        group.write_snapshot().wait()
        self.b.core.call(self.b.queues.maintain)

    @rule()
    def delete_and_make_again(self) -> None:
        self.b.delete_topic(TOPIC)
        self.made += 1
        self.values = []
        self._append(1)

    @invariant()
    def an_outside_view_reads_what_was_acknowledged(self) -> None:
        if self.view is None:
            self.view = TopicView(self.outside, TOPIC)
        assert self.view.bounds() == {0: (0, len(self.values))}
        assert _values(self.view) == self.values

    @invariant()
    def the_lake_watches_answer(self) -> None:
        now = self.b.core.now_ms()
        for status in (self.watch.status(TOPIC, 1, now), self.b.lake_status(TOPIC)[0]):
            assert status.partitions[0].end_offset == len(self.values)
            for history in status.histories:
                assert history.end_offset >= history.lake_offset

    def teardown(self) -> None:
        self.b.close()


LiveReaders.TestCase.settings = settings(
    max_examples=15, stateful_step_count=25, deadline=None, print_blob=True
)
test_readers_of_live_logs_read_what_was_acknowledged = LiveReaders.TestCase


def test_a_view_of_a_topic_made_again_reads_the_new_records(tmp_path: Path) -> None:
    """The fuzzer's case, plainly: a view kept across a deletion reads the new topic."""
    with brook.open(str(tmp_path)) as b:
        b.topic(TOPIC).append_many([Record(b"old-%d" % i) for i in range(4)])
        view = TopicView(open_reader(str(tmp_path)), TOPIC)
        assert view.bounds() == {0: (0, 4)}
        b.delete_topic(TOPIC)
        b.topic(TOPIC).append_many([Record(b"new-%d-longer" % i) for i in range(3)])
        assert view.bounds() == {0: (0, 3)}
        assert _values(view) == [b"new-%d-longer" % i for i in range(3)]
