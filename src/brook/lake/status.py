"""Where the lake stands for a topic: read from storage, so a read-only broker
(`brook lake status` beside a serving one) sees what the writer wrote; in the
writer's broker, from the manifests it last committed (kept in memory)."""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from brook import layout, limits
from brook.errors import CorruptData, TopicNotFound
from brook.lake import manifest as manifests
from brook.lake.manifest import Manifest
from brook.log.view import TopicView
from brook.records import HistoryLake, LakeStatus, PartitionLake
from brook.storage import PublicFiles, Storage

if TYPE_CHECKING:
    from brook.core import Core, TopicState


def lake_topics(core: Core, every_topic: bool = True) -> list[str]:
    """The user topics (internal logs, named `__...`, are not) the lake holds: those set
    `lake=True`, and with `every_topic` (the broker's `lake=True`) those set to neither."""
    return [state.name for state in core.topic_states() if in_lake(state, every_topic)]


def in_lake(state: TopicState, every_topic: bool) -> bool:
    """Whether the lake holds the topic of `state` (see lake_topics)."""
    if state.name.startswith("__"):
        return False
    return state.config.lake if state.config.lake is not None else every_topic


def read_manifest(files: PublicFiles, table: str) -> tuple[Manifest, str | None]:
    """The manifest of the lake table at prefix `table` (layout.lake_topic,
    layout.lake_history) and its stored version (None: none stored yet, and the
    manifest is empty). Raises StorageError, CorruptData."""
    name = layout.lake_manifest_in(table)
    found = files.read(name)
    if found is None:
        return Manifest(), None
    try:
        return manifests.decode(found[0]), found[1]
    except msgspec.DecodeError as exc:
        raise CorruptData(f"lake manifest {files.url(name)} cannot be read: {exc}") from None


Committed = Callable[[str, str | None], Manifest | None]
"""The manifest of a lake table (a topic's, or with a group that group's history) as
its writer last committed it, when this broker writes it (None: read it from storage)."""


class LakeWatch:
    """Answers where the lake stands, again and again (a dashboard refreshes every few
    seconds): it keeps a view of each log between calls, so a call reads only what is
    new of the logs, and takes the manifests from the writer when this broker writes
    them, so it reads none of them (on S3: no GET per manifest and per sealed segment
    each time)."""

    def __init__(self, storage: Storage, committed: Committed | None = None) -> None:
        self.storage = storage
        self.committed = committed
        self._views: OrderedDict[str, TopicView] = OrderedDict()
        """Least recently used first: the first to go when there are too many."""
        self._lock = threading.Lock()
        """One call at a time: views are not shared between threads."""
        self._gone: list[str] = []
        """Logs deleted since the last call, whose views go before the next (`forget`)."""
        self._gone_lock = threading.Lock()

    def forget(self, topic: str, group: str | None = None) -> None:
        """The topic (its groups' status logs with it), or one queue group's status log,
        is deleted: views of it go before the next call, so a log made again under the
        name is never read through what was learned of the old one. Never waits for a
        call under way (the writer role calls it, on deletion)."""
        with self._gone_lock:
            self._gone.append(topic if group is None else layout.queue_status_log(topic, group))

    def status(self, topic: str, partitions: int, now_ms: int) -> LakeStatus:
        """The lake's position and lag for `topic` (`partitions`: its count, as the
        broker knows it). Raises TopicNotFound, StorageError."""
        with self._lock:
            with self._gone_lock:
                gone, self._gone = self._gone, []
            for log in gone:
                for name in [n for n in self._views if n == log or _log_of(n, log)]:
                    del self._views[name]
            view = self._views.get(topic)
            if view is not None and view.partitions != partitions:  # deleted, made again
                del self._views[topic]
            try:
                return self._status(topic, now_ms)
            except TopicNotFound:
                for name in [n for n in self._views if n == topic or _log_of(n, topic)]:
                    del self._views[name]
                raise

    def _status(self, topic: str, now_ms: int) -> LakeStatus:
        view = self._view(topic, None)
        manifest = self._manifest(topic, None)
        partitions = []
        for partition in range(view.partitions):
            extents = view.extents(partition)
            start = extents[0].base_offset if extents else 0
            end = extents[-1].next_offset if extents else 0
            lake = max(manifest.end(partition) or 0, start)
            lag = 0
            for extent in extents:
                if extent.next_offset > lake and extent.stamps:
                    oldest = extent.stamps[max(bisect_right(extent.bases, lake) - 1, 0)]
                    lag = max(0, now_ms - oldest)
                    break
            partitions.append(PartitionLake(partition, lake, end, max(0, end - lake), lag))
        return LakeStatus(
            topic=topic,
            files=len(manifest.files),
            bytes=sum(f.bytes for f in manifest.files),
            rows=sum(f.rows for f in manifest.files),
            partitions=partitions,
            histories=[self._history(topic, g) for g in queue_groups(self.storage, topic)],
        )

    def _history(self, topic: str, group: str) -> HistoryLake:
        manifest = self._manifest(topic, group)
        extents = self._view(layout.queue_status_log(topic, group), 1).extents(0)
        start = extents[0].base_offset if extents else 0
        end = extents[-1].next_offset if extents else 0
        return HistoryLake(
            group=group,
            files=len(manifest.files),
            rows=sum(f.rows for f in manifest.files),
            lake_offset=min(max(manifest.end(0) or 0, start), end),
            end_offset=end,
        )

    def _view(self, log: str, partitions: int | None) -> TopicView:
        view = self._views.get(log)
        if view is None:
            view = self._views[log] = TopicView(self.storage, log, partitions)
            while len(self._views) > limits.lake_watch_views_max:
                self._views.popitem(last=False)
        self._views.move_to_end(log)
        return view

    def _manifest(self, topic: str, group: str | None) -> Manifest:
        kept = self.committed(topic, group) if self.committed is not None else None
        if kept is not None:
            return kept
        prefix = layout.lake_topic(topic) if group is None else layout.lake_history(topic, group)
        return read_manifest(self.storage.public(), prefix)[0]


def _log_of(log: str, topic: str) -> bool:
    return log.startswith(layout.queue_status_log(topic, ""))


def queue_groups(storage: Storage, topic: str) -> list[str]:
    """The queue groups of `topic` (delivery groups included), from their settings."""
    found = []
    for name in storage.list(layout.queues_of(topic)):
        parsed = layout.parse_queue_settings(name)
        if parsed is not None and parsed[0] == topic:
            found.append(parsed[1])
    return found
