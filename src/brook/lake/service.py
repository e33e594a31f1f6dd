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
pass. The lake is kept in the location's public files (plain files, or plain
objects on S3, outside Brook's catalog), which readers without Brook (Spark,
pyarrow, DuckDB, Polars) find by name.

Only the broker that owns the location writes the lake. On a directory its lock
makes sure of that. On S3 a broker fenced by a take-over may still be in a pass,
so the new owner first claims each topic's manifest (replaces it, with If-Match,
carrying its writer epoch) before it deletes any unnamed file: from then on the
fenced broker's manifest writes are refused, and it stops at the epoch it finds.

It runs on its own thread (`brook-lake`), never the committer's: encoding a
segment as Parquet takes seconds of CPU that appends must not wait for.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from bisect import bisect_right
from typing import TYPE_CHECKING

from brook import layout, limits
from brook.core import Hooks
from brook.errors import BrookError, Closed, Fenced, LakeOff, TopicNotFound
from brook.lake import manifest as manifests
from brook.lake import parquet
from brook.lake.manifest import LakeFile, Manifest
from brook.lake.status import lake_topics, read_manifest, status_of
from brook.log.view import Extent, TopicView
from brook.records import LakeStatus
from brook.storage import Superseded

CLAIMS_MAX = 5
"""Tries at claiming a manifest that a fenced broker keeps replacing meanwhile."""

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
        self.files = core.storage.public()
        self.lag_ms = lag_ms
        self._pass = threading.Lock()
        """One pass at a time: the loop's, or a `sync`'s."""
        self._forgetting = threading.Lock()
        """A manifest is committed, or a deleted topic's lake removed, one at a time: a
        pass under way when its topic is deleted never writes its manifest again."""
        self._known: dict[str, _Known] = {}
        """Per topic: its view and its manifest as last committed. A topic's first
        pass reads the manifest, claims it, and deletes the files it does not name
        (a crash's leftovers)."""
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
            known = self._load(topic)
            if known is None:
                return  # deleted meanwhile
        view, manifest = known.view, known.manifest
        now = self.core.now_ms()
        extents = {p: view.extents(p) for p in range(view.partitions)}
        due = manifest.due_for_deletion(now, limits.lake_retire_ms)
        retired = [manifest.retire_below(p, e[0].base_offset, now) for p, e in extents.items() if e]
        if due or any(retired):
            self._commit(topic, known)  # first, so no manifest names a deleted file
        if due:
            self.files.delete(due)
        for partition, found in extents.items():
            if found:
                self._write_partition(topic, known, partition, found, force)

    def _load(self, topic: str) -> _Known | None:
        """A topic's first pass: its view, and its manifest read, claimed and swept."""
        try:
            view = TopicView(self.storage, topic)
        except TopicNotFound:
            return None
        manifest, version = read_manifest(self.files, topic)
        known = _Known(view, manifest, version)
        if self.files.epoch is not None:
            self._claim(topic, known)
        self._sweep(topic, known.manifest)
        self._known[topic] = known
        return known

    def _claim(self, topic: str, known: _Known) -> None:
        """Write the manifest back with this broker's epoch, so a broker it fenced can
        replace it no more (its If-Match fails) before anything unnamed is deleted."""
        name = layout.lake_manifest(topic)
        for _ in range(CLAIMS_MAX):
            self._check_epoch(topic, known.manifest)
            known.manifest.writer_epoch = self.files.epoch
            try:
                known.version = self.files.replace(
                    name, manifests.encode(known.manifest), known.version
                )
                return
            except Superseded:  # the fenced broker committed meanwhile: take its manifest
                known.manifest, known.version = read_manifest(self.files, topic)
        raise Fenced(f"the lake manifest of topic {topic} keeps changing under this broker")

    def _check_epoch(self, topic: str, manifest: Manifest) -> None:
        own = self.files.epoch
        if own is not None and manifest.writer_epoch is not None and manifest.writer_epoch > own:
            raise Fenced(
                f"the lake of topic {topic} is written by a newer broker (epoch "
                f"{manifest.writer_epoch}; this one is {own}): it took this location over"
            )

    def _write_partition(
        self, topic: str, known: _Known, partition: int, extents: list[Extent], force: bool
    ) -> None:
        view, manifest = known.view, known.manifest
        start = max(manifest.end(partition) or 0, extents[0].base_offset)
        for i, extent in enumerate(extents):
            first, end = max(start, extent.base_offset), extent.next_offset
            if first >= end:
                continue
            active = i == len(extents) - 1
            if active and not force and not self._waited(extent, first):
                break
            written = parquet.write(
                self.storage, self.files, view, parquet.Range(partition, first, end)
            )
            if written is None:  # compacted away: nothing to hold, move on
                start = end
                continue
            manifest.add(written)
            self._commit(topic, known, new=written.name)
            start = end
        self._merge_small(topic, known, partition)

    def _waited(self, extent: Extent, first: int) -> bool:
        """Whether the oldest record of `extent` from `first` on has waited the lag."""
        i = max(bisect_right(extent.bases, first) - 1, 0)
        if i >= len(extent.stamps):
            return False
        return self.core.now_ms() - extent.stamps[i] >= self.lag_ms

    def _merge_small(self, topic: str, known: _Known, partition: int) -> None:
        """Merge the newest run of consecutive small files into one."""
        manifest = known.manifest
        run: list[LakeFile] = []
        for file in reversed(manifest.of(partition)):
            if file.bytes >= limits.lake_small_file_bytes or (run and file.next != run[0].first):
                break
            run.insert(0, file)
        if len(run) < limits.lake_merge_files:
            return
        merged = parquet.merge(self.files, topic, run)
        manifest.replace(run, merged, self.core.now_ms())
        self._commit(topic, known, new=merged.name)

    def _commit(self, topic: str, known: _Known, new: str | None = None) -> None:
        """Store the manifest. `new`: the file this commit names first, deleted when the
        commit is refused (no one else knows its name)."""
        with self._forgetting:
            if self._known.get(topic) is not known:
                return  # the topic was deleted during this pass: its lake is gone
            known.manifest.writer_epoch = self.files.epoch
            try:
                known.version = self.files.replace(
                    layout.lake_manifest(topic), manifests.encode(known.manifest), known.version
                )
            except Superseded:
                # Only a newer owner replaces a claimed manifest: this broker is fenced.
                del self._known[topic]
                if new is not None:
                    with contextlib.suppress(BrookError):
                        self.files.delete([new])
                raise Fenced(
                    f"the lake manifest of topic {topic} was replaced by another broker: "
                    "it took this location over"
                ) from None

    def _sweep(self, topic: str, manifest: Manifest) -> None:
        """Delete the files no manifest names: written before a crash, never committed."""
        named = manifest.names()
        unnamed = [
            name
            for name in self.files.list(layout.lake_topic(topic))
            if name.endswith(layout.LAKE_SUFFIX) and name not in named
        ]
        if unnamed:
            log.info("lake: deleting %d files of topic %s never committed", len(unnamed), topic)
            self.files.delete(unnamed)

    def _forget(self, topic: str) -> None:
        with self._forgetting:
            self._known.pop(topic, None)
            self.files.delete_prefix(layout.lake_topic(topic))
        self.core.supervisor.forget_subject(_subject(topic))


class _Known:
    """What the writer keeps of a topic between passes (it is the lake's only writer):
    its view, which keeps what it read of sealed segments so a pass reads only what
    is new, and its manifest as last committed, with the stored version."""

    __slots__ = ("manifest", "version", "view")

    def __init__(self, view: TopicView, manifest: Manifest, version: str | None) -> None:
        self.view = view
        self.manifest = manifest
        self.version = version


def _subject(topic: str) -> str:
    return f"topic {topic}"
