"""A queue group as a table (`brook_queue`, jobs.queue_table), SQL over it, and
redrive of a selection (as functions and as `brook spark queue`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import brook
from brook import limits
from brook.errors import BadRequest
from brook.records import Record
from brook.spark import jobs
from tests.queue.test_shell import Clock
from tests.served import Served

pytestmark = pytest.mark.slow


def _group_in_every_state(data: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Topic `jobs` (2 partitions, 40 records) and group `g` with records in every
    state, a snapshot taken part way; returns the group's stats."""
    monkeypatch.setattr(limits, "queue_snapshot_changes", 10)
    clock = Clock()
    with brook.open(str(data), clock=clock) as b:
        b.create_topic("jobs", partitions=2)
        b.topic("jobs").append_many([Record(b"job %d" % i, key=b"k%d" % i) for i in range(40)])
        q = b.queue("jobs", "g", max_attempts=2, visibility_timeout_ms=60_000)
        first = q.lease(max_records=20, timeout=0)
        q.ack(first[:12])
        q.discard(first[12:15], reason="poison")
        q.nack(first[15:17], reason="timeout talking to the bank", delay_ms=30_000)
        # first[17:20] stay leased; later records stay ready and untouched
        clock.now += 1
        second = q.lease(max_records=2, timeout=0)
        q.ack(second[:1])
        return q.stats()


def test_the_queue_table_shows_every_record_in_the_state_the_group_has(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    stats = _group_in_every_state(data, monkeypatch)
    jobs.queue_table(spark, str(data), "jobs", "g", view="work")
    counts = {
        r.state: r.n
        for r in spark.sql("SELECT state, count(*) n FROM work GROUP BY state").collect()
    }
    assert counts == {
        s: stats[s] for s in ("ready", "leased", "retrying", "acked", "dead") if stats[s]
    }
    assert sum(counts.values()) == 40
    dead = spark.sql("SELECT * FROM work WHERE state = 'dead' ORDER BY partition, offset").collect()
    assert [(r.error, r.attempts, r.redrives) for r in dead] == [("poison", 1, 0)] * 3
    assert all(r.changed_at is not None and r.due_at is None for r in dead)
    assert all(bytes(r.value).startswith(b"job ") and r.topic == "jobs" for r in dead)
    retrying = spark.sql("SELECT * FROM work WHERE state = 'retrying'").collect()
    assert {r.error for r in retrying} == {"timeout talking to the bank"}
    assert all(r.due_at > r.changed_at for r in retrying)
    leased = spark.sql("SELECT * FROM work WHERE state = 'leased'").collect()
    assert all(r.due_at is not None and r.attempts == 1 for r in leased)
    ready = spark.sql("SELECT * FROM work WHERE state = 'ready'").collect()
    assert all(r.attempts == 0 and r.error is None and r.changed_at is None for r in ready)


def test_redrive_of_a_selection_puts_only_those_dead_records_back_to_work(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    _group_in_every_state(data, monkeypatch)
    table = jobs.queue_table(spark, str(data), "jobs", "g")
    dead = table.where("state = 'dead'").orderBy("partition", "offset").collect()
    chosen = table.where(f"state != 'acked' AND NOT (offset = {dead[0].offset})")
    with pytest.raises(BadRequest):
        jobs.redrive(chosen, "jobs", "g")
    assert jobs.redrive(chosen, "jobs", "g", path=str(data)) == 2
    assert jobs.redrive(chosen, "jobs", "g", path=str(data)) == 0  # idempotent
    with brook.open(str(data)) as b:
        assert b.queue("jobs", "g").stats()["dead"] == 1
    after = jobs.queue_table(spark, str(data), "jobs", "g").where("state = 'dead'").collect()
    assert [(r.partition, r.offset) for r in after] == [(dead[0].partition, dead[0].offset)]


def test_redrive_through_a_running_broker(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    _group_in_every_state(data, monkeypatch)
    server = Served(data)
    try:
        table = jobs.queue_table(spark, str(data), "jobs", "g")
        url = f"http://127.0.0.1:{server.port}"
        assert jobs.redrive(table.where("state = 'dead'"), "jobs", "g", url=url) == 3
        with brook.connect(url) as client:
            assert client.queue("jobs", "g").stats()["dead"] == 0
    finally:
        server.close()


def test_a_group_that_does_not_exist_and_bad_options_are_clear_errors(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import PySparkException

    with brook.open(str(tmp_path)) as b:
        b.topic("jobs").append(b"x")
    with pytest.raises(PySparkException, match="has no queue group 'nope'"):
        jobs.queue_table(spark, str(tmp_path), "jobs", "nope").collect()
    reader = spark.read.format("brook_queue").option("path", str(tmp_path))
    with pytest.raises(PySparkException, match="do not apply to a queue group"):
        reader.option("topic", "jobs").option("group", "g").option(
            "startingOffsets", "earliest"
        ).load().collect()


def test_brook_spark_queue_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    _group_in_every_state(data, monkeypatch)
    run = [sys.executable, "-m", "brook.cli", "spark", "queue", "jobs", "g", "--data", str(data)]
    done = subprocess.run(
        [*run, "--master", "local[1]", "--redrive"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["ready=18", "leased=4", "retrying=2", "acked=13", "dead=3"]
    assert lines[1] == "3 record(s) where state = 'dead'"
    assert all("\tdead\t" in line and "error='poison'" in line for line in lines[2:5])
    assert lines[-1] == "redriven: 3 records"
    missing = subprocess.run(  # found before Spark starts: a master it cannot use is fine
        [*run[:-3], "nope", "--data", str(data), "--master", "no-such-master"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().splitlines()[-1] == (
        "Error: not_found: topic jobs has no queue group 'nope'"
    )
