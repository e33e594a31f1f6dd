"""The ceiling of PySpark's Python data source API: a source that only yields
pre-built Arrow batches with the `brook` schema. Imported by Spark's workers."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from brook.lake.arrow import HEADERS_TYPE, SCHEMA, SPARK_SCHEMA

ROWS_PER_BATCH = 100_000


def prebuilt(rows: int, value_bytes: int) -> pa.RecordBatch:
    values = np.frombuffer(np.random.default_rng(7).bytes(rows * value_bytes), np.uint8)
    offsets = np.arange(rows + 1, dtype=np.int32) * value_bytes
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat("bench", rows).cast(pa.string()),
            pa.array(np.zeros(rows, np.int32)),
            pa.array(np.arange(rows, dtype=np.int64)),
            pa.array(np.full(rows, 1_700_000_000_000_000, np.int64)).view(
                pa.timestamp("us", tz="UTC")
            ),
            pa.nulls(rows, pa.binary()),
            pa.Array.from_buffers(
                pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(values)]
            ),
            pa.MapArray.from_arrays(
                pa.array(np.zeros(rows + 1, np.int32)),
                pa.array([], pa.string()),
                pa.array([], pa.binary()),
                type=HEADERS_TYPE,
            ),
        ],
        schema=SCHEMA,
    )


class CeilingReader(DataSourceReader):
    def __init__(self, rows: int, tasks: int, value_bytes: int) -> None:
        self.rows, self.tasks, self.value_bytes = rows, tasks, value_bytes

    def partitions(self) -> list[InputPartition]:
        share = -(-self.rows // self.tasks)
        return [
            InputPartition((i * share, min(self.rows, (i + 1) * share))) for i in range(self.tasks)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        start, stop = partition.value
        batch = prebuilt(ROWS_PER_BATCH, self.value_bytes)
        for at in range(start, stop, ROWS_PER_BATCH):
            yield batch.slice(0, min(ROWS_PER_BATCH, stop - at))


class CeilingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "arrow_ceiling"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: object) -> DataSourceReader:
        return CeilingReader(
            int(self.options["rows"]), int(self.options["tasks"]), int(self.options["valuebytes"])
        )
