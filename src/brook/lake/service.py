"""The lake's writer: a supervised loop that keeps each topic's Parquet files up to date.

Each pass, per topic and partition (docs/ARCHITECTURE.md, "The lake"):

1. Retention: files holding only offsets the log no longer retains leave the
   manifest (deleted `limits.lake_retire_ms` later, so a reader planned on the
   older manifest finishes).
2. Sealed segments past the lake's end are written, one file each.
3. The active segment's acknowledged records are written once the oldest of them
   has waited `lag_ms` (or at once by `sync`): the lag bounds how stale the lake is.
4. Runs of small files (the active segment's, written a lag at a time) are merged
   into one once `limits.lake_merge_files` of them are consecutive.

Every file is stored whole before the manifest names it, and the manifest is
replaced atomically after each change, so a crash at any step leaves the manifest
naming whole files only; the files a crash left unnamed are deleted by the next
pass. Only the broker that owns the location writes the lake (it holds the lock,
or the S3 lease); readers (Spark, pyarrow, DuckDB) read the manifest and files.

It runs on its own thread (`brook-lake`), never the committer's: encoding a
segment as Parquet takes seconds of CPU that appends must not wait for.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from typing import TYPE_CHECKING

from brook import layout, limits
from brook.core import Hooks
from brook.errors import Closed, LakeOff, TopicNotFound
from brook.lake import manifest as manifests
from brook.lake import parquet
from brook.lake.manifest import LakeFile, Manifest
from brook.lake.status import lake_topics, status_of
from brook.log.view import Extent, TopicView
from brook.records import LakeStatus

if TYPE_CHECKING:
    from brook.core import Core

log = logging.getLogger("brook.lake")


class LakeService:
    def __init__(
        self, core: Core, lag_ms: int = limits.lake_lag_ms_default, every_topic: bool = True
    ) -> None:
        self.core = core
        self.every_topic = every_topic
        """The broker's setting (`lake=True`): topics without their own are in the lake."""
        self.storage = core.storage
        self.lag_ms = lag_ms
        self._pass = threading.Lock()
        """One pass at a time: the loop's, or a `sync`'s."""
        self._forgetting = threading.Lock()
        """A manifest is committed, or a deleted topic's lake removed, one at a time: a
        pass under way when its topic is deleted never writes its manifest again."""
        self._known: dict[str, tuple[TopicView, Manifest]] = {}
        """Per topic: its view (which keeps what it read of sealed segments, so a pass
        reads only what is new) and its manifest as last committed (only this writer
        changes it). A topic's first pass reads the manifest and deletes the files it
        does not name (a crash's leftovers)."""
        self._stop = threading.Event()
        core.register(Hooks("lake", on_topic_deleted=self._forget))
        self._thread: threading.Thread | None = None
        if not core.read_only:
            self._thread = core.supervisor.start("lake", self._step, self._stop)

    # ------------------------------------------------------------ the API

    def sync(self, topic: str | None = None) -> list[LakeStatus]:
        """Write every acknowledged record not yet in the lake (of `topic`, or of every
        topic) and return once the files and manifests are durable."""
        self.core.check_writable("sync the lake")
        if topic is not None and not self.core.has_topic(topic):
            raise TopicNotFound(f"topic {topic} does not exist")
        if topic is not None and topic not in self.topics():
            raise LakeOff(f"topic {topic} is not in the lake (it was created with lake=False)")
        names = [topic] if topic is not None else self.topics()
        with self._pass:
            for name in names:
                self._write_topic(name, force=True)
        return [status_of(self.storage, name, self.core.now_ms()) for name in names]

    def topics(self) -> list[str]:
        """The topics in the lake: their own setting, else the broker's."""
        return lake_topics(self.core, self.every_topic)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def close(self) -> None:
        pass

    # ------------------------------------------------------------ the loop

    def _step(self) -> float:
        if self.core.closed:
            raise Closed("the broker is closing")
        with self._pass:
            for name in self.topics():
                if self._stop.is_set():
                    break
                # One topic's failing lake (damage, a full disk) is that topic's alone:
                # shown as it failing, never stopping the others or the broker's health.
                with self.core.supervisor.isolate("lake", _subject(name), "lake"):
                    self._write_topic(name, force=False)
        return min(max(self.lag_ms / 4000, 1.0), 60.0)

    def _write_topic(self, topic: str, force: bool) -> None:
        known = self._known.get(topic)
        if known is None:
            try:
                view = TopicView(self.storage, topic)
            except TopicNotFound:
                return  # deleted meanwhile
            manifest = manifests.decode(self.storage.read_all(layout.lake_manifest(topic)))
            self._sweep(topic, manifest)
            self._known[topic] = known = (view, manifest)
        view, manifest = known
        now = self.core.now_ms()
        extents = {p: view.extents(p) for p in range(view.partitions)}
        due = manifest.due_for_deletion(now, limits.lake_retire_ms)
        retired = [manifest.retire_below(p, e[0].base_offset, now) for p, e in extents.items() if e]
        if due or any(retired):
            self._commit(topic, manifest)  # first, so no manifest names a deleted file
        for name in due:
            self.storage.delete(name)
        for partition, found in extents.items():
            if found:
                self._write_partition(topic, view, manifest, partition, found, force)

    def _write_partition(
        self,
        topic: str,
        view: TopicView,
        manifest: Manifest,
        partition: int,
        extents: list[Extent],
        force: bool,
    ) -> None:
        start = max(manifest.end(partition) or 0, extents[0].base_offset)
        for i, extent in enumerate(extents):
            first, end = max(start, extent.base_offset), extent.next_offset
            if first >= end:
                continue
            active = i == len(extents) - 1
            if active and not force and not self._waited(extent, first):
                break
            written = parquet.write(self.storage, view, parquet.Range(partition, first, end))
            if written is None:  # compacted away: nothing to hold, move on
                start = end
                continue
            manifest.add(written)
            self._commit(topic, manifest)
            start = end
        self._merge_small(topic, manifest, partition)

    def _waited(self, extent: Extent, first: int) -> bool:
        """Whether the oldest record of `extent` from `first` on has waited the lag."""
        i = max(bisect_right(extent.bases, first) - 1, 0)
        if i >= len(extent.stamps):
            return False
        return self.core.now_ms() - extent.stamps[i] >= self.lag_ms

    def _merge_small(self, topic: str, manifest: Manifest, partition: int) -> None:
        """Merge the newest run of consecutive small files into one."""
        run: list[LakeFile] = []
        for file in reversed(manifest.of(partition)):
            if file.bytes >= limits.lake_small_file_bytes or (run and file.next != run[0].first):
                break
            run.insert(0, file)
        if len(run) < limits.lake_merge_files:
            return
        merged = parquet.merge(self.storage, topic, run)
        manifest.replace(run, merged, self.core.now_ms())
        self._commit(topic, manifest)

    def _commit(self, topic: str, manifest: Manifest) -> None:
        with self._forgetting:
            known = self._known.get(topic)
            if known is None or known[1] is not manifest:
                return  # the topic was deleted during this pass: its lake is gone
            self.storage.write_atomic(layout.lake_manifest(topic), manifests.encode(manifest))

    def _sweep(self, topic: str, manifest: Manifest) -> None:
        """Delete the files no manifest names: written before a crash, never committed."""
        known = manifest.names()
        for name in self.storage.list(layout.lake_topic(topic)):
            if name.endswith(layout.LAKE_SUFFIX) and name not in known:
                log.info("lake: deleting %s, written but never committed", name)
                self.storage.delete(name)

    def _forget(self, topic: str) -> None:
        with self._forgetting:
            self._known.pop(topic, None)
            self.storage.delete_prefix(layout.lake_topic(topic))
        self.core.supervisor.forget_subject(_subject(topic))


def _subject(topic: str) -> str:
    return f"topic {topic}"
