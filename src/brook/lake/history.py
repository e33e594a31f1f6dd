"""A queue group's history as a table: its status log, a row per transition.

The status log (brook/queue/status.py) holds every transition of every record a
group touched: leases, acks, nacks with their reason, retries and when they were
due, deaths, and for the broker's delivery groups each attempt's outcome (HTTP
status, latency, error, the start of the answer). A queue keeps only what a
restart needs: segments behind the newest snapshot are deleted. The lake keeps
the rest, so "what died, and why, over the last month" is one query over Parquet:

    SELECT topic, "group", reason, count(*) FROM history
    WHERE state = 'dead' AND changed_at > now() - INTERVAL 30 DAY GROUP BY ALL

Columns (HISTORY_SCHEMA): `topic`, `group`, `endpoint` (the endpoint's name for a
delivery group, else null), `partition` and `offset` (the record; join the topic's
table on them for its key and value), `changed_at` (when), `state` (ready, leased, retrying,
acked, dead), `attempt`, `reason` (a nack's, a discard's, a death's), `due_at`
(the lease's end, or when a retry is due), `status`, `latency_ms`, `error` and
`excerpt` (how a delivery attempt went, when one was reported), and `log_offset`
(the entry's offset in the status log: rows sort by it). A lease's receipt is
left out: it is a credential.
"""

from __future__ import annotations

import msgspec
import pyarrow as pa

from brook import names
from brook.errors import CorruptData
from brook.lake.parquet import Range, Shape
from brook.log.view import TopicView, read_records
from brook.queue import status
from brook.storage import Storage

_TIME = pa.timestamp("us", tz="UTC")
HISTORY_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("group", pa.string()),
        ("endpoint", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("changed_at", _TIME),
        ("state", pa.string()),
        ("attempt", pa.int32()),
        ("reason", pa.string()),
        ("due_at", _TIME),
        ("status", pa.int32()),
        ("latency_ms", pa.float64()),
        ("error", pa.string()),
        ("excerpt", pa.binary()),
        ("log_offset", pa.int64()),
    ]
)
HISTORY_SPARK_SCHEMA = (
    "topic string, `group` string, endpoint string, partition int, offset long, "
    "changed_at timestamp, state string, attempt int, reason string, due_at timestamp, "
    "status int, latency_ms double, error string, excerpt binary, log_offset long"
)
HISTORY = Shape(HISTORY_SCHEMA, ["partition", "offset", "changed_at", "log_offset"], "changed_at")


def history_table(
    storage: Storage, view: TopicView, wanted: Range, topic: str, group: str
) -> pa.Table:
    """The transitions in status-log offsets `wanted` of `topic`'s group `group`."""
    columns: dict[str, list[object]] = {name: [] for name in HISTORY_SCHEMA.names}
    pieces = view.slices({0: wanted.first}, {0: wanted.next})
    for piece in pieces:
        for entry_record in read_records(storage, piece):
            try:
                entry = status.decode(entry_record.value)
            except msgspec.DecodeError as exc:
                raise CorruptData(
                    f"status log of {topic}/{group} at {entry_record.offset}: {exc}"
                ) from None
            for partition, offset, change in entry.changes:
                outcome = change.outcome
                columns["partition"].append(partition)
                columns["offset"].append(offset)
                columns["changed_at"].append(change.at_ms * 1000)
                columns["state"].append(change.state.value)
                columns["attempt"].append(change.attempt)
                columns["reason"].append(change.reason or None)
                columns["due_at"].append(change.until_ms * 1000 if change.until_ms else None)
                columns["status"].append(outcome.status if outcome else None)
                columns["latency_ms"].append(outcome.latency_ms if outcome else None)
                columns["error"].append(outcome.error or None if outcome else None)
                columns["excerpt"].append(outcome.excerpt or None if outcome else None)
                columns["log_offset"].append(entry_record.offset)
    rows = len(columns["offset"])
    endpoint = group.removeprefix(names.ENDPOINT_GROUP_PREFIX)
    columns["topic"] = [topic] * rows
    columns["group"] = [group] * rows
    columns["endpoint"] = [endpoint if endpoint != group else None] * rows
    return pa.Table.from_pydict(
        {
            name: pa.array(values, HISTORY_SCHEMA.field(name).type)
            for name, values in columns.items()
        },
        schema=HISTORY_SCHEMA,
    )
