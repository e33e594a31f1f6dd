"""What the shells read about a running broker (the server, the dashboard, /metrics,
the CLI): its topics' partitions and offsets, its groups, its counters and the loops
that fail. Read models: they change nothing. Part of `Broker` (brook/broker/__init__.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from brook import limits, names, validate
from brook.bridge import LoopBridge
from brook.delivery.summary import failing_now, summary
from brook.groups.consumer import Consumer
from brook.models import Failure, Record
from brook.partitioner import partition_for_key
from brook.queue.handle import Queue
from brook.records import (
    DeliverySummary,
    PartitionInfo,
    StorageStats,
    TimerStats,
    TopicInfo,
)
from brook.stats import CommitStats
from brook.storage.stats import storage_stats

if TYPE_CHECKING:
    from brook.broker import Broker

log = logging.getLogger("brook")


class ReadModels:
    def bridge(self: Broker, loop: asyncio.AbstractEventLoop) -> LoopBridge:
        """Appends and long-poll waits for coroutines on `loop`; close it when done."""
        self.core.check_open()
        return LoopBridge(self.core, self.groups, self.queues, loop)

    def topic_info(self: Broker, name: str) -> TopicInfo:
        """A topic's settings and end offsets. Raises InvalidName, TopicNotFound."""
        self.core.check_open()
        return self.core.topic_state(validate.topic_name(name)).info()

    def partitions(self: Broker, name: str) -> list[PartitionInfo]:
        """Each partition of topic `name` (Brook's own topics too) as it stands."""
        self.core.check_open()
        return [
            PartitionInfo(
                partition=log.partition,
                start_offset=log.start_offset,
                end_offset=log.durable_offset,
                bytes=sum(s.durable_bytes for s in log.segments),
                segments=len(log.segments),
            )
            for log in self.core.topic_state(name).logs
        ]

    def offset_at(self: Broker, name: str, partition: int, at_ms: int) -> int:
        """The first offset of `partition` stamped at or after `at_ms` (the end if none)."""
        self.core.check_open()
        return self.core.topic_state(name).log(partition).offset_at(at_ms)

    def find_queue(self: Broker, topic: str, group: str) -> Queue | None:
        """Queue group `group` on `topic` if the broker has it (a look creates nothing)."""
        self.core.check_open()
        found = self.queues.find(topic, group)
        return Queue(found) if found is not None else None

    def queue_groups(self: Broker, delivery: bool = True) -> list[Queue]:
        """Every queue group, Brook's own (delivery's, named __...) too; without
        delivery's with `delivery=False` (no handle made for them: /metrics at
        thousands of endpoints)."""
        self.core.check_open()
        groups = self.queues.groups()
        if delivery:
            return [Queue(group) for group in groups]
        prefix = names.ENDPOINT_GROUP_PREFIX
        return [Queue(group) for group in groups if not group.group.startswith(prefix)]

    def stream_groups(self: Broker, stored: bool = False) -> list[Consumer]:
        """The stream groups in use since the start; with `stored`, every group whose
        position is stored (a listing of storage)."""
        self.core.check_open()
        return self.groups.stored() if stored else self.groups.consumers()

    def commit_stats(self: Broker) -> CommitStats:
        """What the committer did since the start (records, bytes, batches, fsyncs)."""
        return self.core.commit_stats

    def timer_stats(self: Broker) -> TimerStats:
        self.core.check_open()
        return self.timers.summary()

    def storage_stats(self: Broker) -> StorageStats:
        return storage_stats(self.core.storage)

    def delivery_summary(self: Broker) -> DeliverySummary:
        """Delivery over every endpoint (/metrics' aggregates), and the endpoints to give
        series of their own: those failing now, then those of `metrics_endpoints`, at
        most limits.metrics_endpoints_shown_max, and which of their queue groups
        (delivery/summary.py)."""
        self.core.check_open()
        return summary(
            self.delivery,
            self._metrics_chosen,
            limits.metrics_endpoints_shown_max,
            limits.metrics_endpoint_groups_shown_max,
        )

    def failing_endpoints(self: Broker) -> set[str]:
        """The endpoints failing now (delivery/summary.py's rule), for the dashboard."""
        self.core.check_open()
        return failing_now(self.delivery)

    def failing(self: Broker) -> list[Failure]:
        """Background loops (or their tasks) failing now, that stop the broker's work."""
        return self.supervisor.failing()

    def isolated(self: Broker) -> list[Failure]:
        """Work for one subject (an endpoint, a queue group) failing now; the rest go on."""
        return self.supervisor.isolated()

    def isolated_task(
        self: Broker, loop: str, task: str
    ) -> contextlib.AbstractContextManager[None]:
        """Run a shell's own background task (the dashboard's ticker) supervised: an
        error is logged and shown as `loop`'s alone (isolated, in /v1/health and
        /metrics) until the task next succeeds; it is not raised, except Closed."""
        return self.supervisor.isolate(loop, loop, task)

    def background_errors(self: Broker) -> dict[str, int]:
        """Errors of each background loop since the start (each logged, then retried)."""
        return self.supervisor.errors()

    @property
    def fenced(self: Broker) -> threading.Event:
        """Set once another broker took the storage over (S3); never set on a directory."""
        return self.core.storage.fenced

    def partition_of_key(self: Broker, topic: str, key: bytes) -> int:
        """The partition records of `key` are appended to in `topic` (brook/partitioner.py)."""
        return partition_for_key(key, len(self.partitions(topic)))

    def records_between(
        self: Broker, topic: str, partition: int, low: int, high: int
    ) -> Iterator[Record]:
        """The partition's records at offsets [low, high), in order, read a capped read at
        a time (a read stops at read_bytes_max: big records come a few per read)."""
        handle = self.topic(topic)
        offset = low
        while offset < high:
            records = handle.read(partition, offset, high - offset)
            for record in records:
                if record.offset >= high:
                    return
                yield record
            if not records:
                return
            offset = records[-1].offset + 1

    def records_of_key(
        self: Broker, topic: str, partition: int, key: bytes, before: int, count: int, scan_max: int
    ) -> tuple[int, list[Record]]:
        """Up to `count` records of `key` before offset `before`, newest first, looking
        through at most `scan_max` offsets (records are not indexed by key: a bounded scan
        back, in chunks); and the offset where the scan stopped (the next page's `before`)."""
        first = self.partitions(topic)[partition].start_offset
        found: list[Record] = []
        start = before
        while start > first and before - start < scan_max:
            low = max(first, start - limits.dashboard_key_scan_chunk_records)
            chunk = [r for r in self.records_between(topic, partition, low, start) if r.key == key]
            wanted = count - len(found)
            taken = chunk[-wanted:]  # the newest; the rest wait for the next page
            found.extend(reversed(taken))
            if len(chunk) >= wanted:
                return taken[0].offset, found
            start = low
        return start, found

    def lake_holds(self: Broker, topic: str) -> bool:
        """Whether this broker keeps `topic` in a lake (from the writer's memory: reads nothing)."""
        return self.lake is not None and self.lake.holds(topic)
