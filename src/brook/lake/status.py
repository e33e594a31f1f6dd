"""Where the lake stands for a topic: read from storage alone, so a read-only broker
(`brook lake status` beside a serving one) sees what the writer wrote."""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING

import msgspec

from brook import layout
from brook.errors import CorruptData
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


def status_of(storage: Storage, topic: str, now_ms: int) -> LakeStatus:
    """The lake's position and lag for `topic`. Raises TopicNotFound, StorageError."""
    view = TopicView(storage, topic)
    manifest, _ = read_manifest(storage.public(), layout.lake_topic(topic))
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
        histories=[_history_of(storage, topic, group) for group in queue_groups(storage, topic)],
    )


def queue_groups(storage: Storage, topic: str) -> list[str]:
    """The queue groups of `topic` (delivery groups included), from their settings."""
    found = []
    for name in storage.list(layout.queues_of(topic)):
        parsed = layout.parse_queue_settings(name)
        if parsed is not None and parsed[0] == topic:
            found.append(parsed[1])
    return found


def _history_of(storage: Storage, topic: str, group: str) -> HistoryLake:
    manifest, _ = read_manifest(storage.public(), layout.lake_history(topic, group))
    status_log = TopicView(storage, layout.queue_status_log(topic, group), partitions=1)
    extents = status_log.extents(0)
    start = extents[0].base_offset if extents else 0
    end = extents[-1].next_offset if extents else 0
    return HistoryLake(
        group=group,
        files=len(manifest.files),
        rows=sum(f.rows for f in manifest.files),
        lake_offset=min(max(manifest.end(0) or 0, start), end),
        end_offset=end,
    )
