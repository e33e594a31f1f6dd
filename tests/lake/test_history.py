"""Queue groups' histories in the lake: every transition of the status log as a row,
kept after the status log deletes its segments, read without Brook (pyarrow, and
DuckDB by the recipe docs/FORMAT.md gives for "what died, and why")."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest

import brook
from brook import layout, limits
from tests.delivery.receivers import Answer, Got, Receiver, wait_for
from tests.lake.outside import Outside
from tests.served import Served


def test_every_transition_of_a_queue_group_is_a_row_of_its_history(tmp_path: Path) -> None:
    with brook.open(tmp_path / "data", lake=True, lake_lag_ms=3_600_000) as b:
        b.create_topic("jobs", partitions=2)
        for i in range(6):
            b.topic("jobs").append(b"job %d" % i, key=b"k%d" % i)
        q = b.queue("jobs", "work", max_attempts=2, visibility_timeout_ms=60_000)
        jobs = q.lease(max_records=6, timeout=0)
        assert len(jobs) == 6
        q.ack(jobs[:2])
        q.nack(jobs[2:4], delay_ms=0, reason="upstream said 503")
        q.discard(jobs[4:5], reason="malformed payload")
        again = q.lease(max_records=6, timeout=1.0)
        q.nack(
            [
                j
                for j in again
                if j.record.offset in {x.record.offset for x in jobs[2:3]}
                and j.record.partition == jobs[2].record.partition
            ],
            reason="still 503",
        )
        (waiting,) = b.lake_status("jobs")[0].histories
        assert waiting.group == "work" and waiting.pending > 0 and waiting.rows == 0
        b.lake_sync("jobs")
        rows = Outside(tmp_path / "data").history("jobs", "work")
        (taken,) = b.lake_status("jobs")[0].histories
        assert taken.pending == 0 and taken.rows == len(rows) and taken.files == 1
        expected = Counter()
        for job in jobs:
            for t in q.trace(job.record.partition, job.record.offset):
                expected[
                    (
                        job.record.partition,
                        job.record.offset,
                        t.state.value,
                        t.attempt,
                        t.reason or None,
                    )
                ] += 1
        got = Counter(
            (r["partition"], r["offset"], r["state"], r["attempt"], r["reason"]) for r in rows
        )
        assert got == expected
        assert {r["topic"] for r in rows} == {"jobs"} and {r["group"] for r in rows} == {"work"}
        assert all(r["endpoint"] is None for r in rows)
        dead = [r for r in rows if r["state"] == "dead"]
        assert {r["reason"] for r in dead} == {"malformed payload", "still 503"}
        leased = [r for r in rows if r["state"] == "leased"]
        assert all(r["due_at"] is not None and r["due_at"] > r["changed_at"] for r in leased)


def test_the_history_outlives_the_status_log_s_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "queue_snapshot_changes", 50)  # snapshots, often
    with brook.open(
        tmp_path / "data", lake=True, lake_lag_ms=3_600_000, segment_bytes_max=4096
    ) as b:
        topic = b.topic("work")
        topic.append_many([brook.Record(value=b"%d" % i) for i in range(400)])
        q = b.queue("work", "g")
        acked = 0
        while acked < 400:
            jobs = q.lease(max_records=20, timeout=0)
            q.ack(jobs)
            acked += len(jobs)
        status_log = layout.partition_prefix(layout.queue_status_log("work", "g"), 0)
        segments = [n for n in b.storage.list(status_log) if n.endswith(".seg")]
        assert len(segments) > 3
        b.core.run_maintenance()  # the lake has not taken them: they stay
        assert [n for n in b.storage.list(status_log) if n.endswith(".seg")] == segments
        b.lake_sync()
        b.core.run_maintenance()  # now the ones behind the snapshot go
        assert len([n for n in b.storage.list(status_log) if n.endswith(".seg")]) < len(segments)
        rows = Outside(tmp_path / "data").history("work", "g")
        assert Counter(r["state"] for r in rows) == {"leased": 400, "acked": 400}
        assert {r["offset"] for r in rows} == set(range(400))


def test_what_died_and_why_is_one_duckdb_query_as_the_format_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with brook.open(tmp_path / "brook-data", lake=True) as b:
        for topic in ("orders", "emails"):
            b.topic(topic).append_many([brook.Record(value=b"x") for _ in range(5)])
            q = b.queue(topic, "workers", max_attempts=1)
            jobs = q.lease(max_records=5, timeout=0)
            q.nack(jobs[:3], reason=f"{topic} failed")
            q.ack(jobs[3:])
        b.lake_sync()
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect()
    con.sql(  # docs/FORMAT.md, "Lake": the recipe, word for word
        """SET VARIABLE history = (
  SELECT list('brook-data/' || f.name)
  FROM (SELECT unnest(files) AS f FROM read_json('brook-data/lake/queues/*/*/manifest.json')));"""
    )
    got = con.sql(
        """SELECT topic, "group", reason, count(*) AS records
FROM read_parquet(getvariable('history'))
WHERE state = 'dead' AND changed_at > now() - INTERVAL 30 DAY
GROUP BY ALL ORDER BY records DESC, topic"""
    ).fetchall()
    assert got == [
        ("emails", "workers", "emails failed", 3),
        ("orders", "workers", "orders failed", 3),
    ]


def test_a_deleted_group_s_history_goes_with_it(tmp_path: Path) -> None:
    with brook.open(tmp_path / "data", lake=True) as b:
        b.topic("t").append(b"x")
        q = b.queue("t", "g")
        q.ack(q.lease(timeout=0))
        b.lake_sync()
        outside = Outside(tmp_path / "data")
        assert outside.history("t", "g")
        assert b.core.status_log_hold("t", "g") is not None
        b.queues.delete_group("t", "g")
        assert outside.listing_in(layout.lake_history("t", "g")) == []
        q = b.queue("t", "g")  # the same name again: a new status log, from 0
        q.ack(q.lease(timeout=0))
        b.lake_sync()
        assert [r["state"] for r in outside.history("t", "g")] == ["leased", "acked"]


def test_delivery_attempts_are_in_the_history_with_how_each_went(tmp_path: Path) -> None:
    answers = iter([Answer(503, b"busy, try later"), Answer(200, b"ok")])

    def answer(got: Got) -> Answer:
        return next(answers, Answer(200))

    with (
        Receiver(answer) as receiver,
        brook.open(tmp_path / "data", lake=True, delivery_allow_private_networks=True) as b,
    ):
        b.create_endpoint(
            "billing",
            receiver.url,
            topics=["invoices"],
            backoff={"min_ms": 10, "max_ms": 20, "jitter": 0},
        )
        b.topic("invoices").append(b"invoice 1")
        wait_for(lambda: len(receiver.requests()) == 2)
        wait_for(lambda: b.endpoint("billing").stats().acked == 1)
        b.lake_sync()
        rows = Outside(tmp_path / "data").history("invoices", "__endpoint.billing")
    ended = [r for r in rows if r["status"] is not None]
    assert [(r["state"], r["attempt"], r["status"]) for r in ended] == [
        ("retrying", 1, 503),
        ("acked", 2, 200),
    ]
    assert ended[0]["excerpt"] == b"busy, try later" and ended[0]["latency_ms"] > 0
    assert {r["endpoint"] for r in rows} == {"billing"}


def test_where_the_histories_stand_over_http_and_the_command_line(tmp_path: Path) -> None:
    served = Served(tmp_path / "data", "--lake", "--lake-lag-ms", "3600000")
    try:
        url = f"http://127.0.0.1:{served.port}"
        with brook.connect(url) as client:
            client.topic("web").append(b"x")
            q = client.queue("web", "g")
            q.ack(q.lease(timeout=0))
            (before,) = client.lake_status("web")[0].histories
            assert (before.group, before.rows, before.pending) == ("g", 0, before.end_offset)
            (after,) = client.lake_sync("web")[0].histories
            assert (after.rows, after.pending) == (2, 0)  # leased, acked
        shown = subprocess.run(
            [sys.executable, "-m", "brook.cli", "lake", "status", "--url", url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "  queue group g\t1 file\t2 transitions\t" in shown and "pending=0" in shown
    finally:
        served.close()
