"""The lake's tables: a topic's records, and each of its queue groups' history.

Both copy a log (the topic's partitions; the group's one-partition status log)
into Parquet files under a prefix of their own with a manifest, and the writer
(lake/service.py) treats them alike. What differs is here: which log, where the
files go, how a range of the log becomes rows, and what leaves the table:
a topic's files once retention deleted their records from the log; a history's
once every row is older than the topic's `retention_ms` (kept for good when the
topic keeps its records for good; a status log deletes its own segments as soon
as a snapshot makes them unnecessary, so the lake is where the history stays).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pyarrow as pa

from brook import layout
from brook.lake import parquet
from brook.lake.history import HISTORY, history_table
from brook.lake.parquet import Range, Shape
from brook.lake.typed import FIELDS, fields_column, struct_type
from brook.log.view import TopicView
from brook.storage import Storage


class LakeTable(NamedTuple):
    topic: str
    group: str | None = None
    """None: the topic's records; else this queue group's history."""

    @property
    def prefix(self) -> str:
        if self.group is None:
            return layout.lake_topic(self.topic)
        return layout.lake_history(self.topic, self.group)

    def shape(self, value_schema: dict[str, Any] | None) -> Shape:
        """The files' columns: a topic's, with typed `fields` when it declares a schema."""
        if self.group is not None:
            return HISTORY
        if value_schema is None:
            return parquet.RECORDS
        schema = parquet.FILE_SCHEMA.append(pa.field(FIELDS, struct_type(value_schema)))
        return parquet.RECORDS._replace(schema=schema)

    def __str__(self) -> str:
        return self.topic if self.group is None else f"{self.topic} (queue group {self.group})"

    def view(self, storage: Storage) -> TopicView:
        """The log this table copies. Raises TopicNotFound for a deleted topic."""
        if self.group is None:
            return TopicView(storage, self.topic)
        return TopicView(storage, layout.queue_status_log(self.topic, self.group), partitions=1)

    def rows(
        self,
        storage: Storage,
        view: TopicView,
        wanted: Range,
        value_schema: dict[str, Any] | None,
    ) -> pa.Table:
        if self.group is not None:
            return history_table(storage, view, wanted, self.topic, self.group)
        table = parquet.records_table(storage, view, wanted)
        if value_schema is None:
            return table
        values = table.column("value").to_pylist()
        return table.append_column(FIELDS, fields_column(values, value_schema))
