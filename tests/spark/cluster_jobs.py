"""Jobs on Spark's local-cluster (two executor JVMs) with a shuffle before the brook
sink, for tests/spark/test_cluster.py, which kills them.

Usage: cluster_jobs.py SOURCE_DIR SINK_URL WORK_DIR ROWS_PER_TRIGGER [--batch]
With --batch it first copies topic `in` to `batch-out` with a batch write whose
first task attempt fails half-way, and says WROTE. Then it streams `in` to `out`,
says READY once the query runs, and DONE when it drained the source (or FAILED).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark import TaskContext

from brook.spark.session import local_session

CLUSTER = "local-cluster[2,1,1024]"


def failing_once(flag: Path) -> Any:
    """A map that fails the first attempt of the first task after half its rows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        doomed = context is not None and context.partitionId() == 0 and not flag.exists()
        for i, batch in enumerate(batches):
            if doomed and i >= 2:
                flag.write_text("failed once")
                raise RuntimeError("injected: this task attempt fails half-way")
            yield batch

    return run


def main() -> None:
    source, sink, work, per_trigger = sys.argv[1:5]
    spark = local_session(
        "brook-cluster-jobs",
        master=CLUSTER,
        **{
            "spark.sql.shuffle.partitions": "3",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "500",
            # Executors on one machine would read each other's shuffle files from disk
            # in a fixed order; on a real cluster blocks come over the network in the
            # order they arrive. Do that here too.
            "spark.shuffle.readHostLocalDisk": "false",
            "spark.locality.wait": "0",
        },
    )
    if "--batch" in sys.argv:
        (
            spark.read.format("brook")
            .option("path", source)
            .option("topic", "in")
            .load()
            .repartition(3, "key")
            .select("key", "value")
            .mapInArrow(failing_once(Path(work) / "failed-once"), "key binary, value binary")
            .write.format("brook")
            .mode("append")
            .option("url", sink)
            .option("topic", "batch-out")
            .save()
        )
        print("WROTE", flush=True)
    query = (
        spark.readStream.format("brook")
        .option("path", source)
        .option("topic", "in")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", per_trigger)
        # About three map tasks per partition a micro-batch (rows take some 20 bytes
        # stored; the source is written in small appends and a task reads whole
        # batches): the shuffle's blocks are fetched in any order.
        .option("maxBytesPerTask", str(3 * int(per_trigger)))
        .load()
        .repartition(3, "key")  # a shuffle: rows reach the sink's tasks in any order
        .select("key", "value")
        .writeStream.format("brook")
        .option("url", sink)
        .option("topic", "out")
        .option("checkpointLocation", str(Path(work) / "checkpoint"))
        .option("outageWaitMs", "60000")
        .trigger(availableNow=True)
        .start()
    )
    print("READY", flush=True)
    query.awaitTermination()
    error = query.exception()
    print("DONE" if error is None else f"FAILED {error}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
