"""The lake (issue 38): a topic read as a table against the brook source, and the
writer's cost and lag.

    python -m benchmarks.lake            (also a section of `make bench`)

- Aggregate: count and sum of value lengths by partition over a topic of RECORDS
  records of 100 bytes in 4 partitions, through `brook.spark.table` (the lake's
  files by Spark's Parquet reader) and through `spark.read.format("brook")`, the
  same session, alternately, TRIALS times each; then the same with a filter on
  the timestamp (the last tenth of the records).
- The writer: the seconds and CPU it took to write the lake of that topic (one
  `lake_sync`), its bytes against the segments', and storage writes per GB.
- On S3 (moto on loopback): the requests one `lake_sync` of S3_RECORDS records
  makes, per GB of lake.
- The pipeline demo's recount (examples/pipeline.py): events per key per 5-second
  window over the same topic, from the table and from the source.
- Lag: a producer at RATE records/s for LAG_S seconds into a broker with the lake
  on (lake_lag_ms LAG_MS); the lake's lag sampled each second.
- Typed columns: one `lake_sync` of TYPED_RECORDS JSON values, with and without a
  value_schema of four fields (the cost of decoding each value once).
- History: one `lake_sync` of a queue group's status log after HISTORY_RECORDS
  records were leased and acked (two transitions each).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import brook
from benchmarks.run import machine, payloads, scratch
from benchmarks.spark import _session, _timed
from brook.records import Record

RECORDS = int(os.environ.get("BROOK_BENCH_LAKE_RECORDS", "3000000"))
PARTITIONS = 4
VALUE_BYTES = 100
TRIALS = 3
RATE = 10_000
LAG_S = 30
LAG_MS = 5_000
S3_RECORDS = 500_000
TYPED_RECORDS = 500_000
HISTORY_RECORDS = 200_000
ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "customer": {"type": "string"},
        "amount": {"type": "number"},
        "items": {"type": "integer"},
        "placed_at": {"type": "string", "format": "date-time"},
    },
}


def fill(data: Path, records: int) -> dict[str, float]:
    """The topic, then one lake sync: what writing the lake cost."""
    with brook.open(str(data), lake=True, lake_lag_ms=3_600_000) as b:
        b.create_topic("bench", partitions=PARTITIONS)
        t = b.topic("bench")
        for start in range(0, records, 10_000):
            values = payloads(VALUE_BYTES, min(10_000, records - start))
            t.append_many([Record(v, key=b"%d" % (i % 64)) for i, v in enumerate(values)])
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        status = b.lake_sync("bench")[0]
        seconds = time.perf_counter() - started
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        segments = sum(p.stat().st_size for p in (data / "topics" / "bench").rglob("*.seg"))
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "lake_mb": status.bytes / 2**20,
        "segments_mb": segments / 2**20,
        "files": status.files,
        "writes_per_gb": (status.files + status.files) / (status.bytes / 2**30),
    }


def s3_cost(cache: Path) -> dict[str, float]:
    """Object-store requests of one lake sync of S3_RECORDS records, per GB of lake."""
    from tests.s3server import CREDENTIALS, MotoServer

    os.environ.update(CREDENTIALS)
    moto = MotoServer()
    try:
        with brook.open(
            moto.fresh_url(),
            endpoint_url=moto.endpoint,
            cache_dir=str(cache),
            lake=True,
            lake_lag_ms=3_600_000,
        ) as b:
            b.create_topic("bench", partitions=PARTITIONS)
            t = b.topic("bench")
            for _ in range(0, S3_RECORDS, 10_000):
                t.append_many([Record(v) for v in payloads(VALUE_BYTES, 10_000)])
            before = dict(b.storage_stats().requests)
            status = b.lake_sync("bench")[0]
            after = b.storage_stats().requests
    finally:
        moto.close()
    gb = status.bytes / 2**30
    return {
        kind: (after.get(kind, 0) - before.get(kind, 0)) / gb for kind in ("put", "get", "list")
    } | {"files": status.files, "mb": status.bytes / 2**20}


def queries(spark: Any, data: Path) -> dict[str, list[float]]:
    from pyspark.sql import functions as F

    import brook.spark

    brook.spark.register(spark)

    def source() -> Any:
        return spark.read.format("brook").option("path", str(data)).option("topic", "bench").load()

    def aggregate(df: Any) -> Any:  # count and sum by partition (issue 38)
        return df.groupBy("partition").agg(F.count("*"), F.sum("offset")).collect()

    def scan(df: Any) -> Any:  # the same, reading every value too
        return df.groupBy("partition").agg(F.count("*"), F.sum(F.length("value"))).collect()

    bounds = source().agg(F.min("timestamp"), F.max("timestamp")).collect()[0]
    low, high = bounds[0], bounds[1]
    since = low + (high - low) * 0.9

    def windows(df: Any) -> Any:  # the pipeline demo's recount
        return df.groupBy(F.window("timestamp", "5 seconds"), F.col("key")).count().count()

    times: dict[str, list[float]] = {
        k: []
        for k in (
            *("table", "source", "table_f", "source_f", "table_v", "source_v"),
            *("table_w", "source_w"),
        )
    }
    expected = sorted(scan(source()))
    assert sorted(scan(brook.spark.table(spark, str(data), "bench"))) == expected
    for _ in range(TRIALS):
        times["table_v"].append(_timed(lambda: scan(brook.spark.table(spark, str(data), "bench"))))
        times["source_v"].append(_timed(lambda: scan(source())))
        times["table"].append(
            _timed(lambda: aggregate(brook.spark.table(spark, str(data), "bench")))
        )
        times["source"].append(_timed(lambda: aggregate(source())))
        times["table_f"].append(
            _timed(
                lambda: aggregate(
                    brook.spark.table(spark, str(data), "bench").where(F.col("timestamp") >= since)
                )
            )
        )
        times["source_f"].append(
            _timed(lambda: aggregate(source().where(F.col("timestamp") >= since)))
        )
        times["table_w"].append(
            _timed(lambda: windows(brook.spark.table(spark, str(data), "bench")))
        )
        times["source_w"].append(_timed(lambda: windows(source())))
    return times


def _synced(b: brook.Broker, topic: str) -> tuple[float, float]:
    """(seconds, CPU seconds) of one lake_sync of `topic`."""
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    b.lake_sync(topic)
    seconds = time.perf_counter() - started
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    return seconds, (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)


def typed(data: Path) -> dict[str, float]:
    """One lake_sync of the same JSON values, with and without a value_schema."""
    import json

    values = [
        json.dumps(
            {
                "customer": f"customer-{i % 5000}",
                "amount": i % 997 / 10,
                "items": i % 7,
                "placed_at": "2026-11-27T10:00:00Z",
            }
        ).encode()
        for i in range(TYPED_RECORDS)
    ]
    out: dict[str, float] = {}
    with brook.open(str(data), lake=True, lake_lag_ms=3_600_000) as b:
        for topic, schema in (("plain", None), ("typed", ORDER_SCHEMA)):
            b.create_topic(topic, partitions=PARTITIONS, value_schema=schema)
            for start in range(0, TYPED_RECORDS, 10_000):
                b.topic(topic).append_many([Record(v) for v in values[start : start + 10_000]])
            out[f"{topic}_s"], out[f"{topic}_cpu"] = _synced(b, topic)
            out[f"{topic}_mb"] = b.lake_status(topic)[0].bytes / 2**20
    return out


def history(data: Path) -> dict[str, float]:
    """One lake_sync of a queue group's history: HISTORY_RECORDS leased and acked."""
    with brook.open(str(data), lake=True, lake_lag_ms=3_600_000) as b:
        t = b.topic("jobs")
        for _ in range(0, HISTORY_RECORDS, 10_000):
            t.append_many([Record(b"job")] * 10_000)
        b.lake_sync("jobs")  # the topic's own table first: only the history is timed
        q = b.queue("jobs", "workers")
        done = 0
        while done < HISTORY_RECORDS:
            jobs = q.lease(max_records=1000, timeout=0)
            q.ack(jobs)
            done += len(jobs)
        seconds, cpu = _synced(b, "jobs")
        files = b.storage.public().list("lake/queues/jobs/workers/")
        size = sum((data / name).stat().st_size for name in files if name.endswith(".parquet"))
    return {"seconds": seconds, "cpu_s": cpu, "rows": 2 * HISTORY_RECORDS, "mb": size / 2**20}


def lag(data: Path) -> dict[str, float]:
    """A steady producer; the lake's lag each second, and the writer thread's CPU."""
    samples: list[int] = []
    with brook.open(str(data), lake=True, lake_lag_ms=LAG_MS) as b:
        t = b.topic("steady")
        stop = threading.Event()
        value = os.urandom(VALUE_BYTES)

        def produce() -> None:
            due = time.monotonic()
            while not stop.is_set():
                t.append_many([Record(value)] * (RATE // 100))
                due += 0.01
                time.sleep(max(0.0, due - time.monotonic()))

        producer = threading.Thread(target=produce)
        producer.start()
        started = time.monotonic()
        while time.monotonic() - started < LAG_S:
            time.sleep(1)
            samples.append(b.lake_status("steady")[0].lag_ms)
        stop.set()
        producer.join()
        appended = sum(b.topic("steady").end_offsets().values())
    steady = samples[len(samples) // 3 :]
    return {
        "rate": appended / LAG_S,
        "lag_p50_ms": statistics.median(steady),
        "lag_max_ms": max(steady),
    }


def main() -> str:
    folder = scratch()
    data = folder / "data"
    cost = fill(data, RECORDS)
    spark = _session()
    try:
        times = queries(spark, data)
    finally:
        spark.stop()
    lagged = lag(folder / "lag")
    s3 = s3_cost(folder / "cache")
    typing = typed(folder / "typed")
    kept = history(folder / "history")
    shutil.rmtree(folder, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    def cells(key: str) -> str:
        return ", ".join(f"{v:.2f}" for v in times[key])

    return "\n".join(
        [
            f"## The lake (issue 38) — {stamp}",
            "",
            f"- Machine: {machine()}; load average {os.getloadavg()[0]:.2f}. "
            f"`python -m benchmarks.lake`: a topic of {RECORDS:,} records of {VALUE_BYTES} "
            f"bytes in {PARTITIONS} partitions on local disk, Spark local[2] (4 GB driver); "
            f"each query {TRIALS} times, alternately, medians.",
            "",
            "| query, by partition | table (lake) s | brook source s | source / table |",
            "| --- | ---: | ---: | ---: |",
            f"| count and sum(offset), whole topic | {med['table']:.2f} ({cells('table')}) | "
            f"{med['source']:.2f} ({cells('source')}) | {med['source'] / med['table']:.1f}x |",
            f"| the same, the last tenth by timestamp | {med['table_f']:.2f} "
            f"({cells('table_f')}) | {med['source_f']:.2f} ({cells('source_f')}) | "
            f"{med['source_f'] / med['table_f']:.1f}x |",
            f"| count and sum(length(value)): every value read | {med['table_v']:.2f} "
            f"({cells('table_v')}) | {med['source_v']:.2f} ({cells('source_v')}) | "
            f"{med['source_v'] / med['table_v']:.1f}x |",
            f"| the pipeline demo's recount: events per key per 5 s window | "
            f"{med['table_w']:.2f} ({cells('table_w')}) | {med['source_w']:.2f} "
            f"({cells('source_w')}) | {med['source_w'] / med['table_w']:.1f}x |",
            "",
            "| the writer | figure |",
            "| --- | ---: |",
            f"| one `lake_sync` of the whole topic | {cost['seconds']:.1f} s, "
            f"{cost['cpu_s']:.1f} s of CPU |",
            f"| lake / segments on disk | {cost['lake_mb']:.0f} MiB / "
            f"{cost['segments_mb']:.0f} MiB |",
            f"| files; storage writes per GB of lake (a file and a manifest each) | "
            f"{cost['files']:.0f}; {cost['writes_per_gb']:.0f} |",
            f"| on S3 (moto): requests of one `lake_sync` of {S3_RECORDS:,} records "
            f"({s3['mb']:.0f} MiB of lake, {s3['files']:.0f} files), per GB of lake | "
            f"{s3['put']:.0f} PUTs, {s3['get']:.0f} GETs, {s3['list']:.0f} LISTs |",
            f"| lake lag under a steady {lagged['rate']:,.0f} records/s, lake_lag_ms "
            f"{LAG_MS:,} (p50 / max of 1 s samples after the first third of {LAG_S} s) | "
            f"{lagged['lag_p50_ms'] / 1000:.1f} s / {lagged['lag_max_ms'] / 1000:.1f} s |",
            f"| one `lake_sync` of {TYPED_RECORDS:,} JSON values (4 fields), without / with a "
            f"value_schema (typed columns) | {typing['plain_s']:.2f} s / {typing['typed_s']:.2f} s"
            f" ({typing['plain_cpu']:.1f} / {typing['typed_cpu']:.1f} s of CPU; "
            f"{typing['plain_mb']:.0f} / {typing['typed_mb']:.0f} MiB) |",
            f"| one `lake_sync` of a queue group's history: {kept['rows']:,.0f} transitions "
            f"({HISTORY_RECORDS:,} records leased and acked) | {kept['seconds']:.2f} s, "
            f"{kept['cpu_s']:.1f} s of CPU, {kept['mb']:.1f} MiB |",
            "",
        ]
    )


if __name__ == "__main__":
    print(main())
