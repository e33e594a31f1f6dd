"""Brook for Apache Spark: topics as DataFrames, batch and streaming, and pipeline jobs.

    import brook.spark
    brook.spark.register(spark)
    df = spark.read.format("brook").option("path", "./brook-data").option("topic", "orders").load()

Needs the `spark` extra (`pip install brook[spark]`: pyspark, pyarrow, numpy);
the rest of Brook never imports it. Guide: docs/SPARK.md.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the data sources `brook` (topics) and `brook_queue` (a queue group's
    records and their state) with a SparkSession (idempotent)."""
    from brook.spark.queue import QueueDataSource
    from brook.spark.source import BrookDataSource

    spark.dataSource.register(BrookDataSource)
    spark.dataSource.register(QueueDataSource)


__all__ = ["register"]
