"""A local SparkSession set up the way Brook's jobs, tests and examples need it.

Spark's Python workers run `PYSPARK_PYTHON` (else `python3` on PATH), which must
be the interpreter Brook is installed in; Spark binds to loopback with no UI; a
deep driver stack keeps a query stopped mid-batch from printing a Java
StackOverflowError; Spark logs only errors (log4j2.properties beside this file),
from its start on.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


def local_session(app_name: str = "brook", master: str = "local[2]", **conf: str) -> Any:
    """A SparkSession on this machine with `brook` registered; more settings in `conf`
    (dots written as underscores are not translated: pass full names in a dict).
    `master` may be "local[N]", or "local-cluster[workers,cores,MiB]" for executors in
    JVMs of their own, as on a cluster."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from brook.spark import register

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config(
            "spark.driver.extraJavaOptions",
            f"-Xss16m -Dlog4j2.configurationFile={Path(__file__).with_name('log4j2.properties')}",
        )
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local-cluster"):
        # Each worker of local-cluster[workers,cores,MiB] offers MiB; an executor must fit.
        memory = int(master.rstrip("]").rsplit(",", 1)[1])
        conf.setdefault("spark.executor.memory", f"{max(512, memory * 3 // 4)}m")
    for name, value in conf.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
