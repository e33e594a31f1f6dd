"""Merging small chunk objects into larger run objects, in the background.

A quiet or latency-bound partition syncs often and leaves many small chunks:
one GET each to read back, and to recover from on restart. Once enough wait,
the oldest are joined into one run object; the manifest change is the commit
point, and chunks are deleted only after it, so a merge may stop at any step.

Runs are joined in turn, as a size-tiered LSM tree compacts: once RUNS_JOINED_MIN
runs of about one size follow one another, they become one run. So
10,000 syncs of one small record leave a few objects, not 300 runs of 32 chunks
(a restart on an empty disk reads the file's objects: one GET each). Only runs of
about one size (the largest at most twice the smallest) are joined, so a joined
run, four times its parts, waits for three more of its own size: a byte is
rewritten about log4(RUN_BYTES_MAX / first run size) times, never once per join.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import msgspec

from brook.errors import Fenced, StorageError
from brook.storage.s3 import manifest as m

if TYPE_CHECKING:
    from brook.storage.s3 import S3Storage
    from brook.storage.s3.chunks import ChunkTable

log = logging.getLogger("brook.storage.s3")

RUN_CHUNKS_MIN = 32
"""Chunks merged into one object at a time, at least (unless they are large)."""
RUN_BYTES_MAX = 8 * 1024 * 1024
"""Largest run object merging makes."""
NEWEST_UNMERGED = 2
"""Chunks at the end of a file that merging leaves alone."""
RUNS_JOINED_MIN = 4
"""Runs of about one size joined into one at a time."""
RECENT_BYTES_MAX = 2 * 1024 * 1024
"""Bytes of recently synced small chunks kept in memory per file, for merging."""


class _Stale(Exception):
    """The file changed while a run was being merged; the merge is dropped."""


def _store_run(storage: S3Storage, joined: bytes) -> str:
    """A new run object holding `joined`, also in the cache (readers of recent records
    move to it); its key. Referenced by nothing until a catalog change names it."""
    run_key = storage.new_name("objects")
    storage.create_own(run_key, joined)
    if storage.cache is not None:
        storage.cache.put(run_key, joined)
    return run_key


def _drop(storage: S3Storage, keys: list[str]) -> None:
    """Delete objects a committed catalog change no longer names, and forget them."""
    storage.bucket.delete_many(keys)
    if storage.cache is not None:
        for key in keys:
            storage.cache.forget(key)


def _chunk_bytes(storage: S3Storage, table: ChunkTable, seq: int, key: str) -> bytes:
    """What chunk `seq` adds to its file: nothing for a chunk of no bytes in the table
    (a fence, or a number given up after a PUT without an answer: that PUT may have
    landed all the same, and its bytes belong to no file), else its bytes, checked
    against the size the table holds for it. Raises StorageError."""
    size = table.chunk_size(seq)
    if size == 0:
        return b""
    data = table.recent.get(seq) or storage.fetch(key)
    if len(data) != size:
        raise StorageError(f"chunk {key} holds {len(data)} bytes; its file counts {size} there")
    return data


def merge_next_run(storage: S3Storage, name: str) -> bool:
    """Merge the oldest chunks of an appendable file into one run object, if enough
    small ones wait; True if it did. Safe to stop at any step: the catalog is
    the commit point, and chunks are deleted only once a run replaces them."""
    entry = storage.catalog().files.get(name)
    if entry is None or entry.chunks is None:
        return False
    table = storage.table(name, entry)
    first = entry.merged_chunks
    picked: list[int] = []
    size = 0
    # The newest chunks stay out: a sync may carry batches whose round has not been
    # answered yet, and a failure of that round cuts them back (never inside a run).
    for seq in range(first, table.next_seq - NEWEST_UNMERGED):
        chunk = table.chunk_size(seq)
        if picked and size + chunk > RUN_BYTES_MAX:
            break
        picked.append(seq)
        size += chunk
    if len(picked) < RUN_CHUNKS_MIN and size < RUN_BYTES_MAX // 2:
        return False
    keys = [m.chunk_key(entry.chunks, seq) for seq in picked]
    if len(picked) == 1:
        run_key = keys[0]  # a big chunk is a run as it is
    else:
        run_key = _store_run(
            storage,
            b"".join(
                _chunk_bytes(storage, table, seq, key)
                for seq, key in zip(picked, keys, strict=True)
            ),
        )
    run = m.Run(run_key, len(picked), size)

    def add_run(files: dict[str, m.Entry]) -> None:
        now = files.get(name)
        if now is None or now.chunks != entry.chunks or now.merged_chunks != first:
            raise _Stale
        files[name] = msgspec.structs.replace(now, runs=(*now.runs, run))

    try:
        storage.change(add_run)
    except _Stale:
        if run_key not in keys:
            storage.bucket.delete(run_key)
        return False
    for seq in picked:
        table.forget(seq)
    if run_key not in keys:
        _drop(storage, keys)
    return True


def join_next_runs(storage: S3Storage, name: str) -> bool:
    """Join the oldest RUNS_JOINED_MIN runs of about one size that follow one another
    into one run; True if it did. Safe to stop at any step, as merge_next_run is."""
    entry = storage.catalog().files.get(name)
    if entry is None or entry.chunks is None:
        return False
    runs = entry.runs
    for start in range(len(runs) - RUNS_JOINED_MIN + 1):
        end = start + RUNS_JOINED_MIN
        sizes = [run.size for run in runs[start:end]]
        size = sum(sizes)
        if max(sizes) <= 2 * max(1, min(sizes)) and size <= RUN_BYTES_MAX:
            break  # four of one size: the joined run is four times that, in a tier above
    else:
        return False
    picked = runs[start:end]
    run_key = _store_run(storage, b"".join(storage.fetch(run.key) for run in picked))
    run = m.Run(run_key, sum(r.chunks for r in picked), size)

    def replace_runs(files: dict[str, m.Entry]) -> None:
        now = files.get(name)
        if now is None or now.chunks != entry.chunks or now.runs[:end] != runs[:end]:
            raise _Stale
        files[name] = msgspec.structs.replace(now, runs=(*runs[:start], run, *now.runs[end:]))

    try:
        storage.change(replace_runs)
    except _Stale:
        storage.bucket.delete(run_key)
        return False
    _drop(storage, [r.key for r in picked])
    return True


class Merger:
    """Merges small chunk objects into larger run objects on a thread of its own,
    so readers and restarts fetch a few objects instead of one per sync."""

    def __init__(self, storage: S3Storage) -> None:
        self._storage = storage
        self._wanted: set[str] = set()
        self._cond = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None

    def consider(self, name: str, table: ChunkTable) -> None:
        """Called after each sync: start merging once enough chunks wait."""
        entry = self._storage.catalog().files.get(name)
        if entry is None or table.next_seq - entry.merged_chunks < RUN_CHUNKS_MIN:
            return
        with self._cond:
            if self._closing:
                return
            self._wanted.add(name)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="brook-s3-merge", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._wanted and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                name = self._wanted.pop()
            try:
                while merge_next_run(self._storage, name) or join_next_runs(self._storage, name):
                    pass
            except Fenced:
                log.warning("stopped merging %s: another broker took the prefix over", name)
                return
            except Exception as exc:  # reported (health, metrics); merged again after a sync
                self._storage.supervisor.failed("s3-merge", exc, f"merging {name}")
            else:
                self._storage.supervisor.succeeded("s3-merge", f"merging {name}")

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
