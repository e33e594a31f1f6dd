"""Pipeline jobs over topics, as functions (and as `brook spark ...` commands).

- `export`: a range of a topic to Parquet, partitioned by date, for the data
  lake and for archiving; it reads straight from storage like any `brook` read.
- `queue_table` and `redrive`: a queue group's records with their state, to ask
  in SQL what is dead and why, and the dead ones of a selection put back to work
  (through the broker: only it changes a group).
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import brook
from brook import limits
from brook.errors import BadRequest
from brook.storage import location as locations

Progress = Callable[[int, int], None]
"""Told (tasks done, tasks in all) as a Spark job runs."""


class ExportResult(NamedTuple):
    rows: int
    dates: list[str]
    """The date partitions written (yyyy-MM-dd, UTC)."""


Edge = str | datetime.datetime
""""earliest", "latest", offsets as JSON ({"0": 12}), or a time (naive means UTC)."""


def read_topic(
    spark: Any,
    location: str,
    topic: str,
    starting: Edge = "earliest",
    ending: Edge = "latest",
    storage_options: dict[str, str] | None = None,
) -> Any:
    """The topic's records from `starting` to `ending` as a DataFrame (a `brook` batch
    read); a time means the first record written at or after it."""
    reader = _reader(spark, "brook", location, storage_options).option("topic", topic)
    for name, edge in (("starting", starting), ("ending", ending)):
        if isinstance(edge, datetime.datetime):
            reader = reader.option(f"{name}Timestamp", str(epoch_ms(edge)))
        else:
            reader = reader.option(f"{name}Offsets", edge)
    return reader.load()


def epoch_ms(moment: datetime.datetime) -> int:
    """Milliseconds since the epoch; a naive time is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _reader(spark: Any, source: str, location: str, storage_options: dict[str, str] | None) -> Any:
    reader = spark.read.format(source).option(
        "url" if locations.parse(location).kind == "s3" else "path", location
    )
    for name, value in (storage_options or {}).items():
        reader = reader.option(name, value)
    return reader


def queue_table(
    spark: Any,
    location: str,
    topic: str,
    group: str,
    storage_options: dict[str, str] | None = None,
    view: str | None = None,
) -> Any:
    """Every record `topic` retains with its state in queue group `group` (a
    `brook_queue` read, see brook.spark.queue for the columns), registered as
    the temporary view `view` when one is named."""
    df = _reader(spark, "brook_queue", location, storage_options)
    df = df.option("topic", topic).option("group", group).load()
    if view is not None:
        df.createOrReplaceTempView(view)
    return df


def redrive(
    selection: Any,
    topic: str,
    group: str,
    url: str | None = None,
    path: str | None = None,
    api_key: str | None = None,
) -> int:
    """Put the dead records among `selection` (a DataFrame with columns partition
    and offset, such as a filtered `queue_table`) back to work, through the broker
    at `url` (`brook serve`) or an embedded one on `path` (which no broker may hold
    open). Records not dead are left as they are. Returns how many were redriven.
    Idempotent: a record redriven once is no longer dead."""
    if (url is None) == (path is None):
        raise BadRequest("give exactly one of url (a running broker) or path (a directory)")
    broker: Any = brook.connect(url, api_key=api_key) if url else brook.open(str(path))
    redriven = 0
    with broker:
        queue = broker.queue(topic, group)
        chosen: list[tuple[int, int]] = []
        for row in selection.select("partition", "offset").distinct().toLocalIterator():
            chosen.append((row["partition"], row["offset"]))
            if len(chosen) == limits.redrive_records_max:
                redriven += queue.redrive(records=chosen)
                chosen = []
        if chosen:
            redriven += queue.redrive(records=chosen)
    return redriven


def export(
    spark: Any,
    location: str,
    topic: str,
    output: str,
    starting: Edge = "earliest",
    ending: Edge = "latest",
    mode: str = "errorifexists",
    storage_options: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> ExportResult:
    """Write records [starting, ending) of `topic` as Parquet under `output`, one
    folder per day (`date=yyyy-MM-dd`, the records' UTC dates), with every column
    of the record. `mode` is Spark's: "errorifexists" (the default: an archive is
    never written twice by mistake), "append" or "overwrite". Returns what was written."""
    if mode not in ("errorifexists", "error", "append", "overwrite"):
        raise BadRequest(f'mode must be "errorifexists", "append" or "overwrite", not {mode!r}')
    from pyspark.sql import functions as F

    df = read_topic(spark, location, topic, starting, ending, storage_options)
    dated = df.withColumn("date", F.date_format(F.col("timestamp"), "yyyy-MM-dd"))
    with _reporting(spark, progress):
        dated.write.mode(mode).partitionBy("date").parquet(output)
    written = spark.read.parquet(output)
    if mode == "append":
        written = written.where(F.col("topic") == topic)
    counts = written.groupBy("date").count().collect()
    return ExportResult(sum(r["count"] for r in counts), sorted(str(r["date"]) for r in counts))


class _reporting:
    """While a Spark job runs, tell `progress` how many of its tasks are done."""

    def __init__(self, spark: Any, progress: Progress | None) -> None:
        self.spark = spark
        self.progress = progress
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="brook-spark-progress", daemon=True)

    def __enter__(self) -> None:
        if self.progress is not None:
            self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join()

    def _run(self) -> None:
        assert self.progress is not None
        tracker = self.spark.sparkContext.statusTracker()
        seen: dict[int, tuple[int, int]] = {}
        while not self.stopped.wait(0.2):
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    seen[stage_id] = (info.numCompletedTasks, info.numTasks)
            if seen:
                self.progress(sum(d for d, _ in seen.values()), sum(n for _, n in seen.values()))
