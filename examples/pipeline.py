"""A streaming pipeline beside a running broker: click events -> counts per user in
5-second windows -> a topic and Parquet.

    make pipeline-demo                  # or: python examples/pipeline.py --data ./brook-data
    make pipeline-demo URL=http://127.0.0.1:8080    # beside `make run` (or BROOK_URL=...)

1. `brook serve` runs on the data directory (started here on 127.0.0.1, as `make run`
   would; or give --url of one already running on --data).
2. A producer appends click events, keyed by user, through the HTTP client.
3. Spark reads the events straight from the directory (a `brook` stream, never through
   the broker), counts events per user in 5-second windows of their append time, and
   writes each window once it closes (a 2-second watermark) to the topic `demo.counts`
   through the broker, exactly once per micro-batch, and to Parquet.
4. At the end the events' history is read back as a table (`brook.spark.table`: the
   topic is kept in the lake, so its Parquet files through Spark's own reader and only
   the newest records through the `brook` source), and every count written is checked
   against a batch recount of it.

Needs the spark extra (`pip install 'brook-broker[spark]'`) and Java 17.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import brook
from brook.records import Record

EVENTS, COUNTS = "demo.events", "demo.counts"
USERS = [f"user-{i}" for i in range(8)]
ACTIONS = ["view", "click", "buy"]
WINDOW, WATERMARK = "5 seconds", "2 seconds"


@contextmanager
def broker_at(data: Path, url: str | None) -> Iterator[str]:
    """The URL of a broker serving `data`: `url` if given, else a `brook serve` started
    here on a free loopback port and stopped (by its pid) at the end."""
    if url:
        yield url
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "brook.cli", "serve", "--data", str(data)]
    quiet = {**os.environ, "BROOK_LOG_LEVEL": "warning"}
    server = subprocess.Popen([*command, "--host", "127.0.0.1", "--port", str(port)], env=quiet)
    started = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                sys.exit(
                    f"brook serve did not start on {data}. If a broker already serves it, "
                    "give its address: make pipeline-demo URL=http://127.0.0.1:PORT (8080 for "
                    "make run), or --url, or BROOK_URL"
                )
            try:
                with urllib.request.urlopen(f"{started}/v1/health", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit("brook serve did not answer within 60 s")
                time.sleep(0.2)
        yield started
    finally:
        server.terminate()  # SIGTERM: it finishes the requests in flight, then stops
        server.wait(timeout=60)


def produce(url: str, seconds: float, rate: int, stop: threading.Event) -> int:
    """Append click events at about `rate` per second for `seconds`; returns how many."""
    rng = random.Random(7)
    sent = 0
    step = 0.05
    with brook.connect(url) as client:
        events = client.topic(EVENTS)
        ends_at = time.monotonic() + seconds
        while time.monotonic() < ends_at and not stop.is_set():
            batch = []
            for _ in range(max(1, int(rate * step))):
                user = rng.choice(USERS[:3] * 4 + USERS)  # a few users are busier
                event = {"user": user, "action": rng.choice(ACTIONS)}
                batch.append(Record(json.dumps(event).encode(), key=user.encode()))
            events.append_many(batch)
            sent += len(batch)
            time.sleep(step)
    return sent


def windowed_counts(spark: Any, data: Path) -> Any:
    """Events per user per window of append time, each window final once it closes."""
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("brook")
        .option("path", str(data))
        .option("topic", EVENTS)
        .option("startingOffsets", "earliest")
        .load()
    )
    return (
        events.withWatermark("timestamp", WATERMARK)
        .groupBy(F.window("timestamp", WINDOW), F.col("key").cast("string").alias("user"))
        .count()
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "user",
            "count",
        )
    )


def start_sinks(counts: Any, url: str, out: Path) -> list[Any]:
    """Two queries over the counts: into the topic COUNTS, and into Parquet."""
    from pyspark.sql import functions as F

    as_records = counts.select(
        F.col("user").alias("key"),
        F.to_json(F.struct("window_start", "window_end", "user", "count")).alias("value"),
    )
    to_topic = (
        as_records.writeStream.format("brook")
        .option("url", url)
        .option("topic", COUNTS)
        .option("checkpointLocation", str(out / "checkpoints" / "topic"))
        .outputMode("append")
        .trigger(processingTime="1 second")
        .start()
    )
    to_parquet = (
        counts.writeStream.format("parquet")
        .option("path", str(out / "counts"))
        .option("checkpointLocation", str(out / "checkpoints" / "parquet"))
        .outputMode("append")
        .trigger(processingTime="1 second")
        .start()
    )
    return [to_topic, to_parquet]


def history(spark: Any, data: Path) -> Any:
    """Every event, as one table: the lake's Parquet files, then the rest of the log."""
    import brook.spark

    return brook.spark.table(spark, str(data), EVENTS)


def recount(events: Any) -> dict[tuple[Any, str], int]:
    from pyspark.sql import functions as F

    per_window = events.groupBy(
        F.window("timestamp", WINDOW), F.col("key").cast("string").alias("user")
    ).count()
    return {(r.window.start, r.user): r["count"] for r in per_window.collect()}


def check(spark: Any, data: Path, out: Path) -> int:
    """Every count in the topic and in Parquet equals a batch recount of the events'
    history (read from the lake's table, and checked against the log read whole);
    returns how many windows were written, or exits non-zero."""
    from pyspark.sql import functions as F

    def read(topic: str) -> Any:
        return spark.read.format("brook").option("path", str(data)).option("topic", topic).load()

    started = time.monotonic()
    recounted = recount(history(spark, data))
    from_table = time.monotonic() - started
    started = time.monotonic()
    from_log = recount(read(EVENTS))
    print(
        f"recounted the events' history from the lake's table in {from_table:.1f} s "
        f"(from the log through the brook source: {time.monotonic() - started:.1f} s)"
    )
    schema = "window_start timestamp, window_end timestamp, user string, count long"
    in_topic = [
        (r.c.window_start, r.c.user, r.c["count"])
        for r in read(COUNTS)
        .select(F.from_json(F.col("value").cast("string"), schema).alias("c"))
        .collect()
    ]
    in_parquet = [
        (r.window_start, r.user, r["count"])
        for r in spark.read.parquet(str(out / "counts")).collect()
    ]
    problems = []
    if recounted != from_log:
        problems.append("the lake's table and the log disagree")
    if sorted(in_topic) != sorted(in_parquet):
        problems.append("the topic and the Parquet files disagree")
    if len(set(in_topic)) != len(in_topic):
        problems.append("a window was written to the topic twice")
    problems += [
        f"{user} at {start}: counted {count}, recounted {recounted.get((start, user))}"
        for start, user, count in in_topic
        if recounted.get((start, user)) != count
    ]
    if not in_topic:
        problems.append("no window closed: run for longer (--seconds)")
    if problems:
        sys.exit("pipeline check failed:\n  " + "\n  ".join(problems))
    return len(in_topic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="./brook-data", help="the broker's directory")
    parser.add_argument(
        "--url",
        default=os.environ.get("BROOK_URL") or None,
        help="a broker already serving --data (default: BROOK_URL)",
    )
    parser.add_argument("--out", default="./pipeline-demo", help="Parquet and checkpoints")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to produce")
    parser.add_argument("--rate", type=int, default=2000, help="events per second")
    parser.add_argument(
        "--master",
        default="local[2]",
        help="Spark's master: local[N], or local-cluster[2,1,1024] for executors in JVMs of their own",
    )
    args = parser.parse_args()
    data, out = Path(args.data), Path(args.out)
    shutil.rmtree(out, ignore_errors=True)  # a fresh run: new checkpoints, new Parquet
    from brook.spark.session import local_session

    with broker_at(data, args.url) as url:
        with brook.connect(url) as client:  # start from empty topics
            for topic in (EVENTS, COUNTS):
                if topic in {t.name for t in client.topics()}:
                    client.delete_topic(topic)
            client.create_topic(EVENTS, partitions=2, lake=True)  # also kept as Parquet
            client.create_topic(COUNTS)
        spark = local_session(
            "brook-pipeline-demo", args.master, **{"spark.ui.showConsoleProgress": "false"}
        )
        queries = []
        try:
            queries = start_sinks(windowed_counts(spark, data), url, out)
            print(f"producing events for {args.seconds:.0f} s at about {args.rate}/s ...")
            sent = produce(url, args.seconds, args.rate, threading.Event())
            for query in queries:
                query.processAllAvailable()  # everything appended so far is counted
            for query in queries:
                query.stop()
            with brook.connect(url) as client:  # the history so far into the lake, now
                (lake,) = client.lake_sync(EVENTS)
            print(f"the lake holds {lake.rows} events in {lake.files} Parquet files")
            windows = check(spark, data, out)
            print(f"{sent} events; {windows} closed windows written to {COUNTS} and {out}/counts")
            print("every count matches a batch recount of the events")
            latest = spark.read.parquet(str(out / "counts")).orderBy("window_start", "user")
            latest.where(
                latest.window_start == latest.agg({"window_start": "max"}).first()[0]
            ).show()
        finally:
            for query in queries:
                query.stop()
            spark.stop()


if __name__ == "__main__":
    main()
