"""Brook for Apache Spark: topics as DataFrames, batch and streaming, and pipeline jobs.

    import brook.spark
    brook.spark.register(spark)
    df = spark.read.format("brook").option("path", "./brook-data").option("topic", "orders").load()

Needs the `spark` extra (`pip install 'brook-broker[spark]'`: pyspark, pyarrow, numpy);
the rest of Brook never imports it. Guide: docs/SPARK.md.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from typing import Any

log = logging.getLogger("brook.spark")


def table(
    spark: Any, location: str, topic: str, storage_options: dict[str, str] | None = None
) -> Any:
    """The topic as one DataFrame: its lake's Parquet files read by Spark's own reader,
    the records not in them yet through the `brook` source (brook/spark/lake.py)."""
    from brook.spark.lake import table as lake_table

    return lake_table(spark, location, topic, storage_options)


def history(
    spark: Any,
    location: str,
    topic: str | None = None,
    group: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> Any:
    """Queue groups' histories from the lake, a row per transition (delivery attempts
    with how each went): of every group, of `topic`'s, or of its `group`."""
    from brook.spark.lake import history as lake_history

    return lake_history(spark, location, topic, group, storage_options)


def register(spark: Any) -> None:
    """Register the data sources `brook` (topics) and `brook_queue` (a queue group's
    records and their state) with a SparkSession (idempotent).

    Spark runs the data sources in Python worker processes started with its own
    choice of interpreter (PYSPARK_PYTHON, else `python3` on the PATH), which may not
    have Brook installed: a job would then fail only once it runs, with "No module
    named 'brook'". So the workers' Python is checked here. On a local master the
    data sources are registered to run with this interpreter instead; on a cluster,
    a RuntimeError says what to set."""
    from brook.spark.lake import LakeDataSource
    from brook.spark.queue import QueueDataSource
    from brook.spark.source import BrookDataSource

    context = getattr(spark, "sparkContext", None)  # None on Spark Connect
    chosen = getattr(context, "pythonExec", None)
    if context is None or chosen is None or _imports_brook(chosen):
        spark.dataSource.register(BrookDataSource)
        spark.dataSource.register(QueueDataSource)
        spark.dataSource.register(LakeDataSource)
        return
    if not str(context.master).startswith("local"):
        raise RuntimeError(
            f"Spark's Python workers run {chosen!r}, which cannot import brook: set "
            "PYSPARK_PYTHON (or spark.pyspark.python) to a Python with brook-broker installed "
            "before the SparkSession is created"
        )
    log.info("Spark's workers would run %s, which lacks brook; using %s", chosen, sys.executable)
    context.pythonExec = sys.executable  # read when a data source is registered
    try:
        spark.dataSource.register(BrookDataSource)
        spark.dataSource.register(QueueDataSource)
        spark.dataSource.register(LakeDataSource)
    finally:
        context.pythonExec = chosen


@functools.lru_cache(maxsize=8)
def _imports_brook(python: str) -> bool:
    """Whether `python` (a path or a name on the PATH) can import this Brook."""
    found = shutil.which(python) or python
    if os.path.abspath(found) == os.path.abspath(sys.executable):
        return True
    try:
        done = subprocess.run(
            [found, "-c", "import brook.spark"], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


__all__ = ["register"]
