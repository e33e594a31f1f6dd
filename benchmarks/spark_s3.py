"""Spark reading a topic on S3: bytes and requests per query, against the topic's size.

A topic of TOPIC_BYTES in two partitions (sealed segments of 16 MiB, and active
ones made of merged runs and chunks, as a broker under load leaves them) sits
on moto's S3 server. A request-counting proxy between Spark (driver and tasks)
and the server counts every byte downloaded: by planning alone (the driver's
view of the topic), and by a whole `count()` query, at the default task size
and at 1 MiB tasks. The baseline is the topic itself: a reader can do no better
than download it once. Run alone: `python -m benchmarks.spark_s3` (appends to
RESULTS.md).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import brook
from benchmarks.run import machine, scratch, section_main
from brook.log.view import TopicView
from brook.records import Record
from brook.storage.location import open_reader

TRIALS = 3
TOPIC_BYTES = 64 * 1024 * 1024
APPEND_RECORDS = 2_000
ROOT = Path(__file__).parents[1]


def _topic(moto: Any, folder: Path) -> tuple[str, int, int]:
    """The topic's URL, its record count and its stored segment bytes."""
    url = moto.fresh_url()
    rng = random.Random(1)
    pool = [rng.randbytes(rng.randrange(100, 1000)) for _ in range(APPEND_RECORDS)]
    records = written = 0
    with brook.open(
        url,
        endpoint_url=moto.endpoint,
        cache_dir=str(folder / "cache"),
        segment_bytes_max=16 * 1024 * 1024,
    ) as b:
        b.create_topic("events", partitions=2)
        partition = 0
        while written < TOPIC_BYTES:
            rng.shuffle(pool)
            b.topic("events").append_many([Record(v) for v in pool], partition=partition)
            partition ^= 1
            records += len(pool)
            written += sum(map(len, pool))
        storage: Any = b.storage
        stored = 0
        for name, entry in storage.catalog().files.items():
            if name.endswith(".seg"):
                stored += storage.table(name, entry).size if entry.chunks else entry.size
    return url, records, stored


def main() -> str:
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p
    )
    from tests.s3proxy import FaultyProxy
    from tests.s3server import CREDENTIALS, MotoServer

    os.environ.update(CREDENTIALS)
    from brook.spark.session import local_session

    load_before = os.getloadavg()[0]
    folder = scratch()
    moto = MotoServer()
    proxy = FaultyProxy(int(moto.endpoint.rsplit(":", 1)[1]))
    spark = local_session("brook-bench-s3", **{"spark.ui.showConsoleProgress": "false"})
    try:
        print("spark on s3: writing the topic", flush=True)
        url, count, stored = _topic(moto, folder)
        planning: list[tuple[int, int]] = []
        queries: dict[str, list[tuple[int, int, float]]] = {"64 MiB (default)": [], "1 MiB": []}
        for _ in range(TRIALS):
            proxy.answered_bytes.clear()
            proxy.counted.clear()
            view = TopicView(open_reader(url, {"endpoint_url": proxy.endpoint}), "events")
            bounds = view.bounds()
            view.slices(
                {p: lo for p, (lo, _) in bounds.items()}, {p: hi for p, (_, hi) in bounds.items()}
            )
            view.storage.close()
            planning.append((proxy.answered_bytes["GET"], sum(proxy.counted.values())))
            for label, task_bytes in (
                ("64 MiB (default)", 64 * 1024 * 1024),
                ("1 MiB", 1024 * 1024),
            ):
                proxy.answered_bytes.clear()
                proxy.counted.clear()
                started = time.perf_counter()
                seen = (
                    spark.read.format("brook")
                    .option("url", url)
                    .option("endpoint_url", proxy.endpoint)
                    .option("topic", "events")
                    .option("maxBytesPerTask", str(task_bytes))
                    .load()
                    .count()
                )
                elapsed = time.perf_counter() - started
                assert seen == count, (seen, count)
                queries[label].append(
                    (proxy.answered_bytes["GET"], sum(proxy.counted.values()), elapsed)
                )
                print(f"spark on s3: {label} tasks: {queries[label][-1]}", flush=True)
    finally:
        spark.stop()
        proxy.close()
        moto.close()
    plan_bytes = statistics.median(p for p, _ in planning)
    plan_requests = statistics.median(r for _, r in planning)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Spark reading S3 — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load_before:.2f}, after "
        f"{os.getloadavg()[0]:.2f}. moto's S3 server on 127.0.0.1 behind a counting proxy; "
        f"PySpark local[2]; no cache on the readers (as Spark tasks run).",
        f"- Topic: {count:,} records of 100-1000 random bytes, 2 partitions, "
        f"{stored / 2**20:.1f} MiB stored (segments of 16 MiB: sealed ones, and active ones "
        "of runs and chunks). Baseline: the topic's own bytes. Medians of 3.",
        "",
        "| what | bytes downloaded | x topic | requests | seconds |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| planning (driver) | {plan_bytes:,.0f} | {plan_bytes / stored:.4f} | "
        f"{plan_requests:,.0f} | |",
    ]
    for label, trials in queries.items():
        got = statistics.median(b for b, _, _ in trials)
        lines.append(
            f"| count() query, {label} tasks | {got:,.0f} | {got / stored:.3f} | "
            f"{statistics.median(r for _, r, _ in trials):,.0f} | "
            f"{statistics.median(t for _, _, t in trials):.1f} |"
        )
    lines += ["", "Targets: a whole query <= 1.05x the topic; planning <= 1% of it."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    section_main(main)
