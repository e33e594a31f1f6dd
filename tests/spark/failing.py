"""A `brook` sink whose first commit fails after it published, as a driver that dies
before Spark records the commit: Spark's replay of that micro-batch must then
append nothing twice. Imported by Spark's workers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from brook.spark.options import normalise
from brook.spark.sink import BrookStreamWriter
from brook.spark.source import BrookDataSource


class CommitFailed(Exception):
    pass


class FailOnceWriter(BrookStreamWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        super().__init__(options, schema, overwrite)
        self.flag = Path(normalise(options)["checkpointlocation"] + ".failed-once")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        super().commit(messages, batchId)
        if not self.flag.exists():
            self.flag.write_text(str(batchId))
            raise CommitFailed(f"injected: micro-batch {batchId} appended, not committed")


class FailOnceSource(BrookDataSource):
    @classmethod
    def name(cls) -> str:
        return "brook_fail_once"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return FailOnceWriter(self.options, schema, overwrite)
