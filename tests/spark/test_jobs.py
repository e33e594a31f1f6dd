"""Pipeline jobs: export to Parquet (as a function and as `brook spark export`)."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.records import Record
from brook.spark import jobs

pytestmark = pytest.mark.slow

DAY_S = 86_400


def _records_over_three_days(data: Path) -> list[tuple[Any, Record]]:
    """Records appended under a clock that moves a day at a time: (ack, record) each."""
    now = [1_767_225_600.0]  # 2026-01-01T00:00Z, in seconds
    written = []
    with brook.open(str(data), clock=lambda: now[0]) as b:
        b.create_topic("events", partitions=2)
        for day in range(3):
            records = [
                Record(f"d{day}-{i}".encode(), key=f"k{i % 4}".encode(), headers={"d": b"%d" % day})
                for i in range(40)
            ]
            written += zip(b.topic("events").append_many(records), records, strict=True)
            now[0] += DAY_S
    return written


def test_export_writes_parquet_by_date_that_reads_back_as_the_topic(
    spark: Any, tmp_path: Path
) -> None:
    data, out = tmp_path / "data", tmp_path / "lake"
    written = _records_over_three_days(data)
    reports: list[tuple[int, int]] = []
    result = jobs.export(
        spark, str(data), "events", str(out), progress=lambda d, t: reports.append((d, t))
    )
    assert result.rows == 120
    assert result.dates == ["2026-01-01", "2026-01-02", "2026-01-03"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        f"date={d}" for d in result.dates
    ]
    rows = {(r.partition, r.offset): r for r in spark.read.parquet(str(out)).collect()}
    assert len(rows) == 120
    for ack, record in written:
        row = rows[(ack.partition, ack.offset)]
        assert (row.topic, bytes(row.value), bytes(row.key)) == ("events", record.value, record.key)
        assert {k: bytes(v) for k, v in row.headers.items()} == record.headers
        stamp = datetime.datetime.fromtimestamp(ack.timestamp / 1000, datetime.UTC)
        assert row.timestamp.replace(tzinfo=datetime.UTC) == stamp
        assert str(row.date) == stamp.strftime("%Y-%m-%d")
    # An archive is never written twice by mistake.
    with pytest.raises(Exception, match="already exists"):
        jobs.export(spark, str(data), "events", str(out))


def test_export_a_range(spark: Any, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "lake"
    _records_over_three_days(data)
    result = jobs.export(
        spark, str(data), "events", str(out), starting='{"0": 10, "1": 0}', ending='{"1": 5}'
    )
    offsets = sorted((r.partition, r.offset) for r in spark.read.parquet(str(out)).collect())
    ends = {p: max(o for q, o in offsets if q == p) + 1 for p in (0,)}
    assert [o for p, o in offsets if p == 1] == [0, 1, 2, 3, 4]
    assert [o for p, o in offsets if p == 0] == list(range(10, ends[0]))
    assert result.rows == len(offsets)


def test_export_a_range_of_time(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    written = _records_over_three_days(data)
    second_day = datetime.datetime(2026, 1, 2)
    result = jobs.export(
        spark,
        str(data),
        "events",
        str(tmp_path / "day2"),
        starting=second_day,
        ending=second_day + datetime.timedelta(days=1),
    )
    assert (result.rows, result.dates) == (40, ["2026-01-02"])
    values = {bytes(r.value) for r in spark.read.parquet(str(tmp_path / "day2")).collect()}
    assert values == {r.value for _, r in written if r.value.startswith(b"d1-")}
    later = jobs.export(
        spark, str(data), "events", str(tmp_path / "later"), starting=second_day, ending="latest"
    )
    assert later.dates == ["2026-01-02", "2026-01-03"]


def test_brook_spark_export_on_the_command_line(tmp_path: Path) -> None:
    """One Spark start: a day's export by date; then the mistakes found before Spark."""
    data, out = tmp_path / "data", tmp_path / "lake"
    _records_over_three_days(data)
    run = [sys.executable, "-m", "brook.cli", "spark", "export", "events", str(out)]
    one_day = ["--from", "2026-01-03", "--to", "2026-01-04", "--master", "local[1]"]
    day = subprocess.run(
        [*run, "--data", str(data), *one_day], capture_output=True, text=True, timeout=300
    )
    assert day.returncode == 0, day.stderr
    assert "exported 40 records of events" in day.stdout and "(1 day: 2026-01-03)" in day.stdout
    # Spark's start-up chatter is not the command's output (the JVM's own notice may stay).
    assert "Setting default log level" not in day.stderr and " WARN " not in day.stderr
    assert [p.name for p in sorted(out.glob("date=*"))] == ["date=2026-01-03"]
    again = subprocess.run(
        [*run, "--data", str(data), "--master", "local[1]"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 1
    assert "Traceback" not in again.stderr and "already exists" in again.stderr
    elsewhere = [*run[:-1], str(tmp_path / "elsewhere"), "--data", str(data)]
    bad = subprocess.run([*elsewhere, "--from", "soon"], capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        'Error: bad_request: \'soon\' is neither "earliest", "latest", offsets as JSON like '
        '{"0": 12}, nor a time like 2026-11-21T06:00'
    ]
    gone = subprocess.run(
        [*elsewhere, "--from", '{"9": 0}', "--master", "local[1]"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert gone.returncode == 1
    assert gone.stderr.strip().splitlines()[-1] == (
        "Error: bad_request: startingOffsets names partition(s) [9] the topic does not have"
    )


def test_export_mistakes_are_found_before_spark_starts(tmp_path: Path) -> None:
    """An unknown topic or partition, a wrong --data, an output that exists: each is one
    line at once (a master Spark cannot use shows that Spark never started)."""
    data, out = tmp_path / "data", tmp_path / "lake"
    _records_over_three_days(data)
    out.mkdir()
    run = [sys.executable, "-m", "brook.cli", "spark", "export", "--master", "no-such-master"]
    cases = [
        (["events", str(out), "--data", str(data)], "already exists"),
        (["nope", str(tmp_path / "a"), "--data", str(data)], "topic_not_found"),
        (["events", str(tmp_path / "b"), "--data", str(tmp_path / "missing")], "not a directory"),
        (
            ["events", str(tmp_path / "c"), "--data", str(data), "--to", '{"7": 3}'],
            "endingOffsets names partition(s) [7]",
        ),
    ]
    for args, said in cases:
        done = subprocess.run([*run, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], done.stderr
