"""The lake's writer: a supervised loop that keeps each topic's Parquet files up to date.

Each pass, per table (a topic's records, and each of its queue groups' history:
lake/tables.py) and partition (docs/ARCHITECTURE.md, "The lake"):

1. Retention: files the table no longer keeps (records the log no longer
   retains; history older than the topic's retention) leave the manifest
   (deleted `limits.lake_retire_ms` later, so a reader planned on the older
   manifest finishes).
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
import time
from bisect import bisect_right
from typing import TYPE_CHECKING, Any

from brook import layout, limits
from brook.core import Hooks
from brook.errors import BrookError, Closed, Fenced, LakeOff, TopicNotFound
from brook.lake import manifest as manifests
from brook.lake import parquet
from brook.lake.manifest import LakeFile, Manifest
from brook.lake.status import in_lake, lake_topics, queue_groups, read_manifest
from brook.lake.tables import LakeTable
from brook.log.view import Extent, TopicView
from brook.storage import Superseded

LAKE_NOTE = """This folder is Brook's lake table of topic {topic}.

The table is the Parquet files that manifest.json lists under "files", and only those.
A glob of *.parquet here is not the table: for an hour after a merge or a retention pass
it also finds the files those replaced (their rows would be counted twice), and a file
written just before a crash that no manifest names.

Read the manifest's files (recipes for DuckDB, pyarrow and Polars in Brook's
docs/FORMAT.md, "Lake"), or from Spark use brook.spark.table(spark, location, "{topic}").
"""

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
        """A manifest is committed, or a deleted topic's or group's lake removed, one at
        a time: a pass under way when they are deleted never writes the manifest again."""
        self._known: dict[LakeTable, _Known] = {}
        """Per table: its view and its manifest as last committed. A table's first pass
        reads the manifest, claims it, and deletes the files it does not name (a
        crash's leftovers)."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        """Set when a topic joins the lake: its empty manifest is written at once."""
        self._joining: set[str] = set()
        self._joining_lock = threading.Lock()
        """Guards `_joining` only: the hook that fills it may never wait on the lake."""
        self._next_pass = 0.0
        """When (monotonic) the next full pass is due."""
        core.register(
            Hooks(
                "lake",
                on_topic_created=self._joined,
                on_topic_deleted=self._forget_topic,
                on_group_deleted=self._forget_group,
                status_log_hold=self._status_log_hold,
            )
        )
        self._thread: threading.Thread | None = None
        if not core.read_only:
            self._thread = core.supervisor.start("lake", self._step, self._stop, self._pause)

    # ------------------------------------------------------------ the API

    def sync(self, topic: str | None = None) -> list[str]:
        """Write every acknowledged record, and every transition of its queue groups,
        not yet in the lake (of `topic`, or of every topic) and return once the files
        and manifests are durable; returns the topics written."""
        self.core.check_writable("sync the lake")
        if topic is not None and not self.holds(topic):
            raise LakeOff(f"topic {topic} is not in the lake (it was created with lake=False)")
        names = [topic] if topic is not None else self.topics()
        with self._pass:
            for done, name in enumerate(names):
                try:
                    self._write_topic(name, force=True)
                except Fenced as exc:
                    raise Fenced(
                        f"the lake's sync was cut short after {done} of {len(names)} topics "
                        f"({exc}); the lake holds what its manifests name, and the broker "
                        "that took over writes the rest"
                    ) from None
        return names

    def topics(self) -> list[str]:
        """The topics in the lake: their own setting, else the broker's."""
        return lake_topics(self.core, self.every_topic)

    def holds(self, topic: str) -> bool:
        """Whether the lake keeps `topic`. Raises TopicNotFound."""
        return in_lake(self.core.topic_state(topic), self.every_topic)

    def committed(self, topic: str, group: str | None) -> Manifest | None:
        """A table's manifest as last stored (None: this writer has not loaded it yet)."""
        known = self._known.get(LakeTable(topic, group))
        return None if known is None else known.committed

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()

    def close(self) -> None:
        pass

    # ------------------------------------------------------------ the loop

    def _step(self) -> float:
        if self.core.closed:
            raise Closed("the broker is closing")
        with self._pass:
            self._join_new_topics()
            if time.monotonic() >= self._next_pass:
                for name in self.topics():
                    if self._stop.is_set() or self._fenced():
                        break
                    # One topic's failing lake (damage, a full disk) is that topic's
                    # alone: shown as it failing, never stopping the others or the
                    # broker's health.
                    with self.core.supervisor.isolate("lake", _subject(name), "lake"):
                        self._write_topic(name, force=False)
                self._next_pass = time.monotonic() + min(max(self.lag_ms / 4000, 1.0), 60.0)
        return max(self._next_pass - time.monotonic(), 0.001)

    def _pause(self, seconds: float) -> None:
        """The loop's wait: until the next pass, or a topic joining the lake."""
        self._wake.wait(seconds)
        self._wake.clear()

    def _joined(self, topic: str) -> None:
        """A topic was made (the core's hook, on its writer's thread: no I/O here)."""
        with self._joining_lock:
            self._joining.add(topic)
        self._wake.set()

    def _join_new_topics(self) -> None:
        """Give each topic that joined the lake its manifest, empty, at once: a reader
        going by the manifest (the DuckDB recipe of docs/FORMAT.md) finds the table
        empty rather than missing until the first file is written."""
        with self._joining_lock:
            joining, self._joining = self._joining, set()
        for name in sorted(joining):
            if self._stop.is_set() or self._fenced():
                return
            # A topic deleted meanwhile has nothing to join.
            with (
                self.core.supervisor.isolate("lake", _subject(name), "lake"),
                contextlib.suppress(TopicNotFound),
            ):
                if self.holds(name) and LakeTable(name) not in self._known:
                    self._load(LakeTable(name))

    def _fenced(self) -> bool:
        """Whether another broker took this location over (S3): from then on this one
        writes not one more lake file, though its manifests' If-Match would refuse only
        the tables the new owner has claimed so far."""
        return self.storage.fenced.is_set()

    def _check_owner(self, table: LakeTable) -> None:
        """Raise Fenced once this broker is fenced: checked before each file."""
        if self._fenced():
            raise Fenced(f"another broker took this location over: {table} is written by it now")

    def _write_topic(self, topic: str, force: bool) -> None:
        """The topic's table, then its queue groups' histories."""
        self._write_table(LakeTable(topic), force)
        for group in queue_groups(self.storage, topic):
            self._write_table(LakeTable(topic, group), force)

    def _write_table(self, table: LakeTable, force: bool) -> None:
        self._check_owner(table)
        known = self._known.get(table)
        if known is None:
            known = self._load(table)
            if known is None:
                return  # deleted meanwhile
        bounds = self._bounds(table)
        if bounds is not None and bounds == known.level and not known.manifest.retired:
            return  # level with a log that has not changed since: an idle topic costs nothing
        now = self.core.now_ms()
        extents = {p: known.view.extents(p) for p in range(known.view.partitions)}
        due = known.manifest.due_for_deletion(now, limits.lake_retire_ms)
        if self._retire(table, known.manifest, extents, now) or due:
            self._commit(table, known)  # first, so no manifest names a deleted file
        if due:
            self.files.delete(due)
        for partition, found in extents.items():
            if found:
                self._write_partition(table, known, partition, found, force)
        if bounds is not None:
            reached = all(
                max(known.manifest.end(p) or 0, start) >= end
                for p, (start, end) in enumerate(bounds)
            )
            known.level = bounds if reached else None

    def _bounds(self, table: LakeTable) -> tuple[tuple[int, int], ...] | None:
        """A topic's (start, end) per partition as the broker knows them in memory (None
        for a history: a status log's are not known here)."""
        if table.group is not None:
            return None
        try:
            logs = self.core.topic_state(table.topic).logs
        except TopicNotFound:
            return None
        return tuple((log.start_offset, log.durable_offset) for log in logs)

    def _retire(
        self, table: LakeTable, manifest: Manifest, extents: dict[int, list[Extent]], now: int
    ) -> bool:
        """Retire the files `table` no longer keeps; whether there were any."""
        if table.group is None:
            retired = [
                manifest.retire_below(p, e[0].base_offset, now) for p, e in extents.items() if e
            ]
            return any(retired)
        retention_ms = self.core.topic_state(table.topic).config.retention_ms
        return retention_ms is not None and bool(manifest.retire_older(now - retention_ms, now))

    def _load(self, table: LakeTable) -> _Known | None:
        """A table's first pass: its view, and its manifest read, claimed and swept."""
        try:
            view = table.view(self.storage)
        except TopicNotFound:
            return None
        manifest, version = read_manifest(self.files, table.prefix)
        known = _Known(view, manifest, version)
        with self._forgetting:  # never a manifest for a topic deleted meanwhile
            if not self.core.has_topic(table.topic):
                return None
            if self.files.epoch is not None:
                self._claim(table, known)
            elif version is None:
                self._write_manifest(table, known)  # the table exists from now on, empty
            if version is None and table.group is None:
                self._write_note(table.topic)
        self._sweep(table, known)
        self._known[table] = known
        return known

    def _write_note(self, topic: str) -> None:
        """Tell whoever globs the topic's folder that a glob is not the table (best
        effort: the manifest, not the note, is what readers rely on)."""
        name = layout.lake_note(topic)
        with contextlib.suppress(BrookError):
            if self.files.read(name) is None:
                self.files.create(name, LAKE_NOTE.format(topic=topic).encode())

    def _claim(self, table: LakeTable, known: _Known) -> None:
        """Write the manifest back with this broker's epoch, so a broker it fenced can
        replace it no more (its If-Match fails) before anything unnamed is deleted."""
        for _ in range(limits.lake_claims_max):
            self._check_epoch(table, known.manifest)
            try:
                self._write_manifest(table, known)
                return
            except Superseded:  # the fenced broker committed meanwhile: take its manifest
                known.manifest, known.version = read_manifest(self.files, table.prefix)
        raise Fenced(f"the lake manifest of {table} keeps changing under this broker")

    def _check_epoch(self, table: LakeTable, manifest: Manifest) -> None:
        own = self.files.epoch
        if own is not None and manifest.writer_epoch is not None and manifest.writer_epoch > own:
            raise Fenced(
                f"the lake of {table} is written by a newer broker (epoch "
                f"{manifest.writer_epoch}; this one is {own}): it took this location over"
            )

    def _write_partition(
        self, table: LakeTable, known: _Known, partition: int, extents: list[Extent], force: bool
    ) -> None:
        view, manifest = known.view, known.manifest
        value_schema = self._value_schema(table)
        start = max(manifest.end(partition) or 0, extents[0].base_offset)
        for i, extent in enumerate(extents):
            first, end = max(start, extent.base_offset), extent.next_offset
            if first >= end:
                continue
            active = i == len(extents) - 1
            if active and not force and not self._waited(extent, first):
                break
            wanted = parquet.Range(partition, first, end)
            self._check_owner(table)
            rows = table.rows(self.storage, view, wanted, value_schema)
            if rows.num_rows == 0:  # compacted away, or no transition: nothing to hold
                manifest.reached[partition] = end
                start = end
                continue
            shape = table.shape(value_schema)
            written = parquet.store(self.files, table.prefix, wanted, rows, shape)
            manifest.add(written)
            self._commit(table, known, new=written.name)
            start = end
        self._merge_small(table, known, partition)

    def _value_schema(self, table: LakeTable) -> dict[str, Any] | None:
        """The JSON Schema of a topic's values (typed columns), if it declares one."""
        if table.group is not None:
            return None
        return self.core.topic_state(table.topic).config.value_schema

    def _waited(self, extent: Extent, first: int) -> bool:
        """Whether the oldest record of `extent` from `first` on has waited the lag."""
        i = max(bisect_right(extent.bases, first) - 1, 0)
        if i >= len(extent.stamps):
            return False
        return self.core.now_ms() - extent.stamps[i] >= self.lag_ms

    def _merge_small(self, table: LakeTable, known: _Known, partition: int) -> None:
        """Merge the newest run of consecutive small files into one."""
        manifest = known.manifest
        run: list[LakeFile] = []
        for file in reversed(manifest.of(partition)):
            if file.bytes >= limits.lake_small_file_bytes or (run and file.next != run[0].first):
                break
            run.insert(0, file)
        if len(run) < limits.lake_merge_files:
            return
        shape = table.shape(self._value_schema(table))
        self._check_owner(table)
        merged = parquet.merge(self.files, table.prefix, run, shape)
        manifest.replace(run, merged, self.core.now_ms())
        self._commit(table, known, new=merged.name)

    def _commit(self, table: LakeTable, known: _Known, new: str | None = None) -> None:
        """Store the manifest. `new`: the file this commit names first, deleted when the
        commit is refused or the table was deleted meanwhile (no one else knows its name)."""
        with self._forgetting:
            if self._known.get(table) is not known:
                self._drop(new)  # deleted during this pass: so goes what it just wrote
                return
            if self._fenced():  # taken over while the file was written: not ours to name
                self._drop(new)
                self._check_owner(table)
            try:
                self._write_manifest(table, known)
            except Superseded:
                # Only a newer owner replaces a claimed manifest: this broker is fenced.
                del self._known[table]
                self._drop(new)
                raise Fenced(
                    f"the lake manifest of {table} was replaced by another broker: "
                    "it took this location over"
                ) from None

    def _write_manifest(self, table: LakeTable, known: _Known) -> None:
        """Replace the stored manifest with `known.manifest` (carrying this broker's
        epoch) if it is still the version last read or written. Raises Superseded."""
        known.manifest.writer_epoch = self.files.epoch
        encoded = manifests.encode(known.manifest)
        known.version = self.files.replace(
            layout.lake_manifest_in(table.prefix), encoded, known.version
        )
        known.committed = manifests.decode(encoded)

    def _drop(self, new: str | None) -> None:
        """Delete a file no manifest will name (best effort: a leftover is swept later)."""
        if new is not None:
            with contextlib.suppress(BrookError):
                self.files.delete([new])

    def _sweep(self, table: LakeTable, known: _Known) -> None:
        """Delete the files no manifest names: written before a crash, never committed."""
        named = known.manifest.names()
        unnamed = [
            name
            for name in self.files.list(table.prefix)
            if name.endswith(layout.LAKE_SUFFIX)
            and name not in named
            and name.count("/") == table.prefix.count("/") + 1  # not another table's
        ]
        if unnamed and self.files.epoch is not None:
            # A newer owner that claimed the manifest since this one did writes files
            # this listing may hold: only while the claim stands were they all ours.
            found = self.files.read(layout.lake_manifest_in(table.prefix))
            if found is None or found[1] != known.version:
                raise Fenced(f"the lake of {table} was claimed by another broker meanwhile")
        if unnamed:
            log.info("lake: deleting %d files of %s never committed", len(unnamed), table)
            self.files.delete(unnamed)

    # ------------------------------------------------------------ hooks

    def _status_log_hold(self, topic: str, group: str) -> int | None:
        """How far a queue group's status log must be kept: up to what its history in
        the lake has taken (None: the topic is not in the lake)."""
        try:
            if not self.holds(topic):
                return None
        except TopicNotFound:
            return None
        known = self._known.get(LakeTable(topic, group))
        return 0 if known is None else known.manifest.end(0) or 0

    def _forget_topic(self, topic: str) -> None:
        with self._forgetting:
            for table in [t for t in self._known if t.topic == topic]:
                del self._known[table]
            self.files.delete_prefix(layout.lake_topic(topic))
            self.files.delete_prefix(layout.lake_histories_of(topic))
        self.core.supervisor.forget_subject(_subject(topic))

    def _forget_group(self, topic: str, group: str) -> None:
        """A deleted group's history goes with it: one created again under its name
        starts a new status log, from offset 0."""
        with self._forgetting:
            self._known.pop(LakeTable(topic, group), None)
            self.files.delete_prefix(layout.lake_history(topic, group))


class _Known:
    """What the writer keeps of a table between passes (it is the lake's only writer):
    the view of its log, which keeps what it read of sealed segments so a pass reads
    only what is new, and its manifest as last committed, with the stored version."""

    __slots__ = ("committed", "level", "manifest", "version", "view")

    def __init__(self, view: TopicView, manifest: Manifest, version: str | None) -> None:
        self.view = view
        self.manifest = manifest
        self.version = version
        self.committed = manifests.decode(manifests.encode(manifest))
        """The manifest as stored, a copy apart from the one passes change: what
        `committed` shows to readers on other threads."""
        self.level: tuple[tuple[int, int], ...] | None = None
        """A topic's (start, end) per partition when a pass left the lake level with
        them: while they stay so, a pass has nothing to do."""


def _subject(topic: str) -> str:
    return f"topic {topic}"
