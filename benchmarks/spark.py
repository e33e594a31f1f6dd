"""Spark: batch reads beside three baselines, streaming rate and latency, the sink.

- Batch read: a topic of BATCH_RECORDS records of 100 random bytes (written in
  appends of 10,000) read by a local[2] SparkSession: `count()` and a `groupBy`
  on a column derived from the value. Beside, in the same session and on the
  same rows: a Python data source that only yields pre-built Arrow batches (the
  ceiling of PySpark's Python data source API), `spark.read.json` and
  `spark.read.parquet` of the same rows.
- Streaming: `maxRecordsPerTrigger` micro-batches with Trigger.AvailableNow into
  Spark's noop sink (records/s); and, with a 1 s trigger, the end-to-end latency
  of records appended at a steady rate (append → seen in foreachBatch).
- Sink: rows written to a topic through `brook serve` (rows/s).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import brook
from benchmarks.run import machine, scratch, section_main
from brook.records import Record

TRIALS = 3
BATCH_RECORDS = int(os.environ.get("BROOK_BENCH_SPARK_RECORDS", "10000000"))
VALUE_BYTES = 100
APPEND = 10_000
STREAM_RECORDS = 2_000_000
PER_TRIGGER = 500_000
LATENCY_RATE = 2_000
LATENCY_SECONDS = 10
SINK_ROWS = 1_000_000
ROOT = Path(__file__).parents[1]


def _session() -> Any:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p
    )
    from benchmarks.spark_ceiling import CeilingSource
    from brook.spark.session import local_session

    spark = local_session(
        "brook-bench",
        **{"spark.ui.showConsoleProgress": "false", "spark.driver.memory": "4g"},
    )
    spark.dataSource.register(CeilingSource)
    return spark


def _fill(data: Path, topic: str, records: int) -> None:
    pool = [os.urandom(VALUE_BYTES) for _ in range(APPEND)]
    with brook.open(str(data)) as b:
        t = b.topic(topic)
        for start in range(0, records, APPEND):
            t.append_many([Record(v) for v in pool[: min(APPEND, records - start)]])


def _timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def batch_reads(spark: Any, data: Path, folder: Path) -> dict[str, list[tuple[float, float]]]:
    """Per source: (count records/s, groupBy records/s) per trial."""
    from pyspark.sql import functions as F

    brook_df = spark.read.format("brook").option("path", str(data)).option("topic", "bench").load()
    tasks = brook_df.rdd.getNumPartitions()
    json_path, parquet_path = str(folder / "json"), str(folder / "parquet")
    brook_df.select("offset", "value").write.json(json_path)
    brook_df.select("offset", "value").write.parquet(parquet_path)
    sources = {
        "brook": lambda: (
            spark.read.format("brook").option("path", str(data)).option("topic", "bench").load()
        ),
        "Arrow ceiling": lambda: (
            spark.read.format("arrow_ceiling")
            .option("rows", str(BATCH_RECORDS))
            .option("tasks", str(tasks))
            .option("valuebytes", str(VALUE_BYTES))
            .load()
        ),
        "spark.read.json": lambda: spark.read.schema("offset long, value binary").json(json_path),
        "spark.read.parquet": lambda: spark.read.parquet(parquet_path),
    }
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in sources}
    for load in sources.values():
        load().count()  # warm-up, not timed: the JVM compiles its hot paths on first use
    for _ in range(TRIALS):
        for name, load in sources.items():
            counted = _timed(lambda load=load: load().count())
            grouped = _timed(
                lambda load=load: (
                    load().groupBy(F.substring("value", 1, 1).alias("first")).count().collect()
                )
            )
            out[name].append((BATCH_RECORDS / counted, BATCH_RECORDS / grouped))
            print(
                f"spark: {name}: count {out[name][-1][0]:,.0f}/s, "
                f"groupBy {out[name][-1][1]:,.0f}/s",
                flush=True,
            )
    return out


def stream_rate(spark: Any, data: Path, folder: Path) -> float:
    query = (
        spark.readStream.format("brook")
        .option("path", str(data))
        .option("topic", "stream")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", PER_TRIGGER)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(folder / f"rate-{time.monotonic_ns()}"))
        .trigger(availableNow=True)
    )
    start = time.perf_counter()
    running = query.start()
    running.awaitTermination()
    return STREAM_RECORDS / (time.perf_counter() - start)


def stream_latency(spark: Any, folder: Path) -> tuple[float, float]:
    """p50 and p99 seconds from append to being seen in a 1 s micro-batch."""
    data = folder / f"latency-{time.monotonic_ns()}"
    with brook.open(str(data)) as b:
        b.topic("live").append(b"start")
    lags: list[float] = []

    def seen(df: Any, batch_id: int) -> None:
        now = time.time()
        for row in df.select("timestamp").collect():
            lags.append(now - row.timestamp.timestamp())

    query = (
        spark.readStream.format("brook")
        .option("path", str(data))
        .option("topic", "live")
        .load()
        .writeStream.foreachBatch(seen)
        .option("checkpointLocation", str(data / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )
    stop = threading.Event()

    def append() -> None:
        with brook.open(str(data)) as b:
            t = b.topic("live")
            step = 1 / 100
            next_at = time.monotonic()
            while not stop.is_set():
                t.append_many([Record(b"x" * VALUE_BYTES)] * (LATENCY_RATE // 100))
                next_at += step
                time.sleep(max(0.0, next_at - time.monotonic()))

    while not query.recentProgress:
        time.sleep(0.1)
    writer = threading.Thread(target=append)
    writer.start()
    time.sleep(LATENCY_SECONDS)
    stop.set()
    writer.join()
    time.sleep(2.5)
    query.stop()
    lags.sort()
    return lags[len(lags) // 2], lags[int(len(lags) * 0.99)]


def sink_rate(spark: Any, folder: Path, firsts: list[float] | None = None) -> float:
    from tests.served import Served

    server = Served(folder / f"served-{time.monotonic_ns()}")
    try:
        df = spark.range(SINK_ROWS).selectExpr("cast(id as string) as value").cache()
        df.count()

        def write(topic: str) -> None:
            (
                df.write.format("brook")
                .mode("append")
                .option("url", f"http://127.0.0.1:{server.port}")
                .option("topic", topic)
                .save()
            )

        # The first write of a session starts the sink's Python workers and imports
        # (4 s here): timed apart, as a streaming query pays it once.
        first = _timed(lambda: write("warm-up"))
        print(f"spark: first sink write {SINK_ROWS / first:,.0f} rows/s", flush=True)
        if firsts is not None:
            firsts.append(SINK_ROWS / first)
        elapsed = _timed(lambda: write("sunk"))
        client = brook.connect(f"http://127.0.0.1:{server.port}")
        assert sum(client.topic("sunk").end_offsets().values()) == SINK_ROWS
        client.close()
        df.unpersist()
    finally:
        server.close()
    return SINK_ROWS / elapsed


def sink_row() -> tuple[float, float]:
    """(rows/s of the sink once warm, of the first write of the session): a session of its own."""
    folder = scratch()
    spark = _session()
    firsts: list[float] = []
    try:
        warm = sink_rate(spark, folder, firsts)
        return warm, firsts[0]
    finally:
        spark.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> str:
    load_before = os.getloadavg()[0]
    folder = scratch()
    data = folder / "data"
    print(f"spark: writing {BATCH_RECORDS:,} records of {VALUE_BYTES} bytes", flush=True)
    _fill(data, "bench", BATCH_RECORDS)
    _fill(data, "stream", STREAM_RECORDS)
    spark = _session()
    try:
        reads = batch_reads(spark, data, folder)
        rates = []
        for _ in range(TRIALS):
            rates.append(stream_rate(spark, data, folder))
            print(f"spark: stream {rates[-1]:,.0f} records/s", flush=True)
        latencies = []
        for _ in range(TRIALS):
            latencies.append(stream_latency(spark, folder))
            print(f"spark: latency p50 {latencies[-1][0]:.2f} s, p99 {latencies[-1][1]:.2f} s")
        sinks = []
        for _ in range(TRIALS):
            sinks.append(sink_rate(spark, folder))
            print(f"spark: sink {sinks[-1]:,.0f} rows/s", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(folder, ignore_errors=True)
    med = {n: tuple(statistics.median(t[i] for t in v) for i in (0, 1)) for n, v in reads.items()}
    ceiling, json_, parquet = (
        med["Arrow ceiling"],
        med["spark.read.json"],
        med["spark.read.parquet"],
    )
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Spark — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load_before:.2f}, after "
        f"{os.getloadavg()[0]:.2f}. PySpark 4.3.0, local[2], driver memory 4g.",
        f"- Batch read: {BATCH_RECORDS:,} records of {VALUE_BYTES} random bytes in one "
        f"partition (appends of {APPEND:,}); `count()`, and `groupBy` on the value's first "
        "byte. Baselines on the same rows in the same session: a Python data source yielding "
        "pre-built Arrow batches (the API's ceiling), `spark.read.json` and "
        "`spark.read.parquet` (columns offset and value). One untimed warm-up read of each, "
        "then medians of 3 trials.",
        "",
        "| source | count (records/s) | groupBy (records/s) | trials (count) |",
        "| --- | ---: | ---: | --- |",
    ]
    for name, trials in reads.items():
        lines.append(
            f"| {name} | {med[name][0]:,.0f} | {med[name][1]:,.0f} | "
            f"{', '.join(f'{t[0]:,.0f}' for t in trials)} |"
        )
    lines += [
        "",
        f"- brook vs the Arrow ceiling: {med['brook'][0] / ceiling[0]:.2f}x (count), "
        f"{med['brook'][1] / ceiling[1]:.2f}x (groupBy); target >= 0.7.",
        f"- brook vs spark.read.json: {med['brook'][0] / json_[0]:.2f}x (count), "
        f"{med['brook'][1] / json_[1]:.2f}x (groupBy); target >= 2.",
        f"- brook vs spark.read.parquet: {med['brook'][0] / parquet[0]:.2f}x (count), "
        f"{med['brook'][1] / parquet[1]:.2f}x (groupBy); reported.",
        f"- The Arrow ceiling itself vs spark.read.json: {ceiling[0] / json_[0]:.2f}x (count), "
        f"{ceiling[1] / json_[1]:.2f}x (groupBy): no Python data source can be faster than "
        "the ceiling, so this bounds the ratio to JSON.",
        f"- Streaming, {STREAM_RECORDS:,} records, maxRecordsPerTrigger {PER_TRIGGER:,}, "
        f"AvailableNow into noop: {statistics.median(rates):,.0f} records/s "
        f"({', '.join(f'{r:,.0f}' for r in rates)}).",
        f"- End-to-end latency, 1 s trigger, {LATENCY_RATE:,} records/s appended for "
        f"{LATENCY_SECONDS} s: p50 {statistics.median(p for p, _ in latencies):.2f} s, "
        f"p99 {statistics.median(q for _, q in latencies):.2f} s.",
        f"- Sink: {SINK_ROWS:,} rows through `brook serve`: "
        f"{statistics.median(sinks):,.0f} rows/s ({', '.join(f'{s:,.0f}' for s in sinks)}).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    section_main(main)
