"""S3-compatible object storage behind the storage port: the bucket is the database.

Everything lives under one prefix: the manifest (catalog and writer epoch, see
manifest.py), immutable whole-file objects, and the numbered chunk objects of
appendable files. A sync of an appendable file is one PUT of the bytes
appended since the last sync, and returns only once the store has answered
200 OK; nothing is acknowledged before.

Single writer (SPEC §0): `lock` takes the prefix over by bumping the epoch in
the manifest with If-Match. The previous owner then fails:
- on its next catalog change (If-Match on a manifest it no longer has);
- on its next chunk PUT: `open_appendable` puts an empty fence chunk at the
  next number of every file it opens, and chunks are created with
  If-None-Match, so the old owner's PUT of that number is refused.
Both raise Fenced, and nothing it writes afterwards is ever read: the fence
ends its chunk sequences, and its catalog changes are never made.
"""

from __future__ import annotations

import itertools
import logging
import threading
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from brook import limits
from brook.errors import Fenced, StorageError
from brook.storage import check_name
from brook.storage.s3 import manifest as m
from brook.storage.s3.cache import ObjectCache
from brook.storage.s3.objects import Bucket, Changed, Exists

log = logging.getLogger("brook.storage.s3")

RUN_CHUNKS_MIN = 32
"""Chunks merged into one object at a time, at least (unless they are large)."""
RUN_BYTES_MAX = 8 * 1024 * 1024
"""Largest run object merging makes."""
RECENT_BYTES_MAX = 2 * 1024 * 1024
"""Bytes of recently synced small chunks kept in memory per file, for merging."""
INLINE_BYTES_MAX = 4 * 1024
"""Files up to this size live in the manifest itself (one PUT to replace)."""
FENCE_ATTEMPTS_MAX = 20
READ_ATTEMPTS_MAX = 3


class MissingObject(StorageError):
    """An object the catalog pointed at is gone: merged away meanwhile, or lost."""


class _Stale(Exception):
    """The file changed while a run was being merged; the merge is dropped."""


def _fenced(what: str) -> Fenced:
    return Fenced(
        f"{what}: another broker has taken over this bucket prefix; this one must stop writing"
    )


class ChunkTable:
    """Where the synced chunks of one appendable file start; grows by `add` only.

    It covers chunks from `first_seq` on, the first starting at byte `base`
    (what runs merged before it hold).
    """

    def __init__(
        self, prefix: str, sizes: Sequence[int], first_seq: int = 0, base: int = 0
    ) -> None:
        self.prefix = prefix
        self.first_seq = first_seq
        self.recent: dict[int, bytes] = {}
        """Bytes of chunks synced by this broker and not merged yet, so merging them
        needs no GET (bounded by RECENT_BYTES_MAX)."""
        self.recent_bytes = 0
        self.starts: list[int] = []
        self.sizes: list[int] = []
        self.size = base
        for size in sizes:
            self.add(size)

    def add(self, size: int) -> None:
        # Readers may bisect concurrently: append the size before the start, and
        # grow `size` last, so a reader never sees a chunk it cannot find.
        self.sizes.append(size)
        self.starts.append(self.size)
        self.size += size

    @property
    def next_seq(self) -> int:
        return self.first_seq + len(self.starts)

    def remember(self, seq: int, data: bytes) -> None:
        if len(data) > RECENT_BYTES_MAX // RUN_CHUNKS_MIN:
            return  # large chunks are runs by themselves, never read to be merged
        self.recent[seq] = data
        self.recent_bytes += len(data)
        while self.recent_bytes > RECENT_BYTES_MAX:
            self.forget(min(self.recent))

    def forget(self, seq: int) -> None:
        data = self.recent.pop(seq, None)
        if data is not None:
            self.recent_bytes -= len(data)

    def chunk_size(self, seq: int) -> int:
        return self.sizes[seq - self.first_seq]

    def cut(self, seq: int) -> None:
        """Forget chunks from `seq` on (the file is being cut back)."""
        index = seq - self.first_seq
        base = self.starts[0] if self.starts else self.size
        del self.starts[index:]
        del self.sizes[index:]
        self.size = self.starts[-1] + self.sizes[-1] if self.starts else base

    def spans(self, position: int, end: int) -> list[tuple[int, int, int]]:
        """(seq, from, to) within each chunk covering bytes [position, end)."""
        out = []
        index = max(0, bisect_right(self.starts, position) - 1)
        while index < len(self.starts) and self.starts[index] < end:
            start, size = self.starts[index], self.sizes[index]
            if size:  # fences are empty chunks
                out.append(
                    (
                        self.first_seq + index,
                        max(position, start) - start,
                        min(end, start + size) - start,
                    )
                )
            index += 1
        return out


class S3Storage:
    def __init__(
        self,
        url: str,
        endpoint_url: str | None = None,
        region: str | None = None,
        cache_dir: str | Path | None = None,
        cache_bytes: int = limits.cache_bytes_default,
        request_timeout_s: float = limits.object_request_timeout_s_default,
    ) -> None:
        self.bucket = Bucket(url, endpoint_url, region, request_timeout_s)
        self.cache = ObjectCache(Path(cache_dir), cache_bytes) if cache_dir is not None else None
        self._mutex = threading.Lock()
        """Guards the manifest, its ETag and the chunk tables."""
        self._manifest: m.Manifest | None = None
        self._etag = ""
        self._unsettled: tuple[bytes, m.Manifest] | None = None
        """A manifest write whose outcome could not be learned (its bytes, its catalog)."""
        self._ids = itertools.count()
        self._tables: dict[str, ChunkTable] = {}
        self.merger = Merger(self)

    # ------------------------------------------------------------ ownership

    def lock(self) -> None:
        """Take the prefix over: bump the epoch (If-Match), or create the manifest."""
        for _ in range(FENCE_ATTEMPTS_MAX):
            found = self.bucket.get(m.MANIFEST_KEY)
            try:
                if found is None:
                    manifest = m.Manifest(epoch=1)
                    self._etag = self.bucket.create(m.MANIFEST_KEY, m.encode(manifest))
                else:
                    try:
                        manifest = m.decode(found[0])
                    except ValueError as exc:
                        raise StorageError(f"{self.bucket.url}: {exc}") from None
                    manifest.epoch += 1
                    self._etag = self.bucket.replace(m.MANIFEST_KEY, m.encode(manifest), found[1])
            except (Exists, Changed):
                continue  # another broker moved first; read again and go after it
            self._manifest = manifest
            log.info("took over %s as writer epoch %d", self.bucket.url, manifest.epoch)
            return
        raise StorageError(
            f"{self.bucket.url}: could not take the prefix over; brokers keep racing"
        )

    @property
    def epoch(self) -> int:
        return self._catalog().epoch

    def _catalog(self) -> m.Manifest:
        assert self._manifest is not None, "lock() first"
        return self._manifest

    def _new_name(self, kind: str) -> str:
        return f"{kind}/{self._catalog().epoch}-{next(self._ids)}"

    def _change(self, edit: Callable[[dict[str, m.Entry]], None]) -> None:
        """Apply `edit` to the catalog and write the manifest (If-Match); raises Fenced
        if another broker has taken over, StorageError if the write failed."""
        with self._mutex:
            for _ in range(2):
                changed = m.copy(self._catalog())
                edit(changed.files)
                raw = m.encode(changed)
                try:
                    self._etag = self.bucket.replace(m.MANIFEST_KEY, raw, self._etag)
                    self._manifest = changed
                    return
                except (Changed, StorageError) as exc:
                    if not self._settle_manifest(raw, changed, exc):
                        return
            raise StorageError(f"{self.bucket.url}: the manifest could not be written")

    def _settle_manifest(self, written: bytes, changed: m.Manifest, failure: Exception) -> bool:
        """After a manifest PUT that failed, find out what the bucket holds: a lost
        answer or a retry refused because the first try landed leave our bytes there.
        Returns True when the change should be made again on top of what is there."""
        try:
            found = self.bucket.get(m.MANIFEST_KEY)
        except StorageError:
            self._unsettled = (written, changed)  # it may have landed: check next time
            raise
        if found is not None and found[0] == written:
            self._etag, self._manifest, self._unsettled = found[1], changed, None
            return False
        if found is not None and self._unsettled is not None and found[0] == self._unsettled[0]:
            # An earlier write whose outcome we could not learn did land: adopt it.
            self._etag, self._manifest = found[1], self._unsettled[1]
            self._unsettled = None
            return True
        if found is not None and found[1] != self._etag:
            raise _fenced("changing the catalog")
        if isinstance(failure, StorageError):
            raise failure
        raise StorageError(f"{self.bucket.url}: the manifest could not be written")

    # ------------------------------------------------------------ objects

    def _fetch(self, key: str) -> bytes:
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                return cached
        found = self.bucket.get(key)
        if found is None:
            raise MissingObject(f"{self.bucket.url}: object {key} is missing")
        if self.cache is not None:
            self.cache.put(key, found[0])
        return found[0]

    def _create_own(self, key: str, data: bytes) -> None:
        """Create an object under a key only this broker uses (its epoch is in the key).

        A create refused because the key exists means a retry of this very PUT
        found the first try stored; anything else there is damage.
        """
        try:
            self.bucket.create(key, data)
        except Exists:
            found = self.bucket.get(key)
            if found is None or found[0] != data:
                raise StorageError(
                    f"{self.bucket.url}: {key} holds bytes this broker did not write"
                ) from None

    def _delete_objects(self, entry: m.Entry) -> None:
        """Remove what an entry pointed at (after the catalog stopped pointing at it)."""
        try:
            for key in [entry.key, *(run.key for run in entry.runs)]:
                if key is not None and not (entry.chunks and key.startswith(entry.chunks)):
                    self.bucket.delete(key)
                    if self.cache is not None:
                        self.cache.forget(key)
            if entry.chunks is not None:
                keys = [key for key, _ in self.bucket.list(entry.chunks)]
                self.bucket.delete_many(keys)
                if self.cache is not None:
                    for key in keys:
                        self.cache.forget(key)
        except StorageError as exc:
            # Unreferenced objects cost storage, never correctness.
            log.warning("could not remove objects no longer used: %s", exc)

    # ------------------------------------------------------------ the port

    def write_atomic(self, name: str, data: bytes) -> None:
        check_name(name)
        if len(data) <= INLINE_BYTES_MAX:
            entry = m.Entry(data=bytes(data), size=len(data))
        else:
            key = self._new_name("objects")
            self._create_own(key, data)
            entry = m.Entry(key=key, size=len(data))
        old = self._catalog().files.get(name)

        def put(files: dict[str, m.Entry]) -> None:
            files[name] = entry

        self._change(put)
        if old is not None:
            self._delete_objects(old)

    def read_all(self, name: str) -> bytes | None:
        entry = self._catalog().files.get(name)
        if entry is None:
            return None
        if entry.data is not None:
            return entry.data
        reader = S3ReadFile(self, name)
        return reader.read(0, reader.size())

    def create_appendable(self, name: str, initial: bytes) -> S3AppendFile:
        check_name(name)
        prefix = self._new_name("chunks") + "/"
        self._create_own(m.chunk_key(prefix, 0), initial)
        old = self._catalog().files.get(name)

        def add(files: dict[str, m.Entry]) -> None:
            files[name] = m.Entry(chunks=prefix)

        self._change(add)
        if old is not None:
            self._delete_objects(old)
        table = ChunkTable(prefix, [len(initial)])
        with self._mutex:
            self._tables[name] = table
        return S3AppendFile(self, name, table)

    def open_appendable(self, name: str) -> S3AppendFile:
        """Open an appendable file and fence it: no earlier owner can add a chunk after this."""
        entry = self._entry(name)
        if entry.chunks is None:
            raise StorageError(f"{name} is not an appendable file")
        for _ in range(FENCE_ATTEMPTS_MAX):
            table = self._load_table(entry)
            try:
                self.bucket.create(m.chunk_key(entry.chunks, table.next_seq), b"")
            except Exists:
                continue  # the previous owner just added one: read again, fence after it
            table.add(0)
            with self._mutex:
                self._tables[name] = table
            return S3AppendFile(self, name, table)
        raise StorageError(f"{name}: could not fence the previous owner's chunks")

    def void_chunk(self, name: str, prefix: str, seq: int) -> None:
        """Record that chunk `seq` of `name` holds nothing of the file, whatever lands there."""

        def void(files: dict[str, m.Entry]) -> None:
            entry = files.get(name)
            if entry is None or entry.chunks != prefix:
                raise StorageError(f"{name} changed while one of its chunks was being given up")
            files[name] = msgspec.structs.replace(entry, void=(*entry.void, seq))

        self._change(void)

    def _entry(self, name: str) -> m.Entry:
        entry = self._catalog().files.get(name)
        if entry is None:
            raise StorageError(f"opening {name} failed: no such file")
        return entry

    def _load_table(self, entry: m.Entry) -> ChunkTable:
        """The chunks of a file after its runs, numbered with no gap (chunks after a gap
        were never synced; chunks already merged may linger until deleted). A void
        chunk counts as empty, whether or not something landed there."""
        assert entry.chunks is not None
        first = entry.merged_chunks
        found = {m.chunk_seq(key): size for key, size in self.bucket.list(entry.chunks)}
        void = set(entry.void)
        sizes: list[int] = []
        seq = first
        while seq in found or seq in void:
            sizes.append(0 if seq in void else found[seq])
            seq += 1
        return ChunkTable(entry.chunks, sizes, first, entry.merged_bytes)

    def table(self, name: str, entry: m.Entry) -> ChunkTable:
        """The chunk table of an appendable file: the live one if this broker holds it."""
        assert entry.chunks is not None
        with self._mutex:
            table = self._tables.get(name)
        if table is None or table.prefix != entry.chunks:
            table = self._load_table(entry)
            with self._mutex:
                self._tables[name] = table
        return table

    def open_read(self, name: str) -> S3ReadFile:
        self._entry(name)
        return S3ReadFile(self, name)

    def list(self, prefix: str) -> list[str]:
        return sorted(n for n in self._catalog().files if n.startswith(prefix))

    def delete(self, name: str) -> None:
        self._remove(lambda n: n == name)

    def delete_prefix(self, prefix: str) -> None:
        self._remove(lambda n: n.startswith(prefix))

    def _remove(self, chosen: Callable[[str], bool]) -> None:
        gone = {n: e for n, e in self._catalog().files.items() if chosen(n)}
        if not gone:
            return

        def drop(files: dict[str, m.Entry]) -> None:
            for name in gone:
                files.pop(name, None)

        self._change(drop)
        with self._mutex:
            for name in gone:
                self._tables.pop(name, None)
        for entry in gone.values():
            self._delete_objects(entry)

    def close(self) -> None:
        """Stop merging; there is no lock to release: the next broker simply takes over."""
        self.merger.close()

    # ------------------------------------------------------------ merging

    def merge_next_run(self, name: str) -> bool:
        """Merge the oldest chunks of an appendable file into one run object, if enough
        small ones wait; True if it did. Safe to stop at any step: the catalog is
        the commit point, and chunks are deleted only once a run replaces them."""
        entry = self._catalog().files.get(name)
        if entry is None or entry.chunks is None:
            return False
        table = self.table(name, entry)
        first = entry.merged_chunks
        picked: list[int] = []
        size = 0
        for seq in range(first, table.next_seq):
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
            run_key = self._new_name("objects")
            joined = b"".join(
                table.recent.get(seq) or self._fetch(key)
                for seq, key in zip(picked, keys, strict=True)
            )
            self._create_own(run_key, joined)
            if self.cache is not None:
                self.cache.put(run_key, joined)  # readers of recent records move to the run
        run = m.Run(run_key, len(picked), size)

        def add_run(files: dict[str, m.Entry]) -> None:
            now = files.get(name)
            if now is None or now.chunks != entry.chunks or now.merged_chunks != first:
                raise _Stale
            files[name] = msgspec.structs.replace(now, runs=(*now.runs, run))

        try:
            self._change(add_run)
        except _Stale:
            if run_key not in keys:
                self.bucket.delete(run_key)
            return False
        for seq in picked:
            table.forget(seq)
        if run_key not in keys:
            self.bucket.delete_many(keys)
            if self.cache is not None:
                for key in keys:
                    self.cache.forget(key)
        return True


class S3ReadFile:
    """Reads of one file through the catalog, so a file rewritten meanwhile reads whole."""

    def __init__(self, storage: S3Storage, name: str) -> None:
        self._storage = storage
        self._name = name

    def _now(self) -> m.Entry:
        return self._storage._entry(self._name)

    def read(self, position: int, length: int) -> bytes:
        for _ in range(READ_ATTEMPTS_MAX - 1):
            try:
                return self._read(self._now(), position, length)
            except MissingObject:
                continue  # chunks merged into a run meanwhile: look again
        return self._read(self._now(), position, length)

    def _read(self, entry: m.Entry, position: int, length: int) -> bytes:
        if entry.data is not None:
            return entry.data[position : position + length]
        if entry.key is not None:
            end = min(position + length, entry.size)
            if position >= end:
                return b""
            return self._storage._fetch(entry.key)[position:end]
        table = self._storage.table(self._name, entry)
        end = min(position + length, table.size)
        parts = []
        at = 0
        for run in entry.runs:
            if position < at + run.size and at < end:
                data = self._storage._fetch(run.key)
                parts.append(data[max(position, at) - at : min(end, at + run.size) - at])
            at += run.size
        for seq, start, stop in table.spans(max(position, at), end):
            chunk = self._storage._fetch(m.chunk_key(table.prefix, seq))
            parts.append(chunk[start:stop])
        return b"".join(parts)

    def size(self) -> int:
        entry = self._now()
        if entry.chunks is not None:
            return self._storage.table(self._name, entry).size
        return entry.size

    def close(self) -> None:
        pass


class S3AppendFile:
    """An appendable file as chunk objects: each `sync` PUTs what was appended since the last.

    `append` and `sync` may run on different threads (the committer's writer
    and syncer), and a `truncate` (a failed batch being cut back) may come
    while a sync's PUT is on its way. So the bytes are in three places:
    synced (in the chunk table), in flight (taken by the running sync) and
    pending; `size()` counts all three. A truncate during a PUT cancels it:
    whatever the store answers, those bytes are not part of the file, and
    their chunk number is settled before it is used again.
    """

    def __init__(self, storage: S3Storage, name: str, table: ChunkTable) -> None:
        self._storage = storage
        self._name = name
        self._table = table
        self._lock = threading.Lock()
        self._pending: list[bytes | memoryview] = []
        self._pending_bytes = 0
        self._inflight = b""
        self._cuts = 0
        """Bumped by every truncate, so a sync can tell its PUT was cancelled."""
        self._unsure: tuple[int, bytes] | None = None
        """A chunk whose PUT got no answer, or was cancelled: it may or may not be stored."""

    def append(self, parts: Sequence[bytes | memoryview]) -> None:
        with self._lock:
            self._pending.extend(parts)
            self._pending_bytes += sum(map(len, parts))

    def reserve(self, size: int) -> None:
        pass  # objects need no preallocation

    def size(self) -> int:
        with self._lock:
            return self._table.size + len(self._inflight) + self._pending_bytes

    def sync(self) -> None:
        """PUT what was appended so far as the next chunk. Raises StorageError, or Fenced."""
        with self._lock:
            if not self._pending:
                return
        self._settle_unsure()  # first: it may move the next chunk number on
        with self._lock:
            if not self._pending:
                return  # cut back meanwhile
            data = self._inflight = b"".join(self._pending)
            self._pending = []
            self._pending_bytes = 0
            cuts = self._cuts
        seq = self._table.next_seq
        try:
            self._put(seq, data)
        except BaseException:
            with self._lock:
                if self._inflight is data:
                    self._inflight = b""
            raise
        with self._lock:
            if self._cuts != cuts:  # cut back while in flight: not part of the file
                self._unsure = (seq, data)
                raise StorageError(f"the sync of {self._name} was cancelled by a failure")
            self._inflight = b""
            self._table.add(len(data))
            self._table.remember(seq, data)
        if self._storage.cache is not None:
            self._storage.cache.put(m.chunk_key(self._table.prefix, seq), data)
        self._storage.merger.consider(self._name, self._table)

    def _put(self, seq: int, data: bytes) -> None:
        """Store chunk `seq`; returns only once the store has it. Raises Fenced or StorageError."""
        key = m.chunk_key(self._table.prefix, seq)
        bucket = self._storage.bucket
        try:
            try:
                bucket.create(key, data)
            except Exists:
                # Either a retry of our own PUT that had already landed, or the fence
                # of a broker that took over; only our own bytes mean success.
                found = bucket.get(key)
                if found is None or found[0] != data:
                    raise _fenced(f"writing {self._name}") from None
        except StorageError:
            self._unsure = (seq, data)  # no answer we can trust: give the number up
            raise

    def _settle_unsure(self) -> None:
        """Before the next chunk: give up the number of a PUT that had no answer.

        Its records were never acknowledged (the callers got StorageError and the
        log cut them back). The PUT may still land later (a request the store got
        but answered too late), so its number is never used again: the catalog
        marks it void, and readers skip it whatever it holds.
        """
        if self._unsure is None:
            return
        seq, _ = self._unsure
        self._storage.void_chunk(self._name, self._table.prefix, seq)
        if self._storage.cache is not None:
            self._storage.cache.forget(m.chunk_key(self._table.prefix, seq))
        self._table.add(0)
        self._unsure = None

    def truncate(self, size: int) -> None:
        with self._lock:
            self._cuts += 1
            if size >= self._table.size:
                unsynced = self._inflight + b"".join(self._pending)
                kept = unsynced[: size - self._table.size]
                self._inflight = b""
                self._pending = [kept] if kept else []
                self._pending_bytes = len(kept)
                return
            self._inflight = b""
            self._pending = []
            self._pending_bytes = 0
        self._cut_synced(size)

    def _cut_synced(self, size: int) -> None:
        """Cut durable chunks back to `size` (a damaged tail found by recovery)."""
        self._settle_unsure()
        table = self._table
        if size < self._storage._entry(self._name).merged_bytes:
            raise StorageError(
                f"{self._name}: cannot cut back to byte {size}, inside chunks already merged"
            )
        spans = table.spans(size, table.size)
        first_seq, keep, _ = spans[0]
        head = b""
        if keep:
            head = self._storage._fetch(m.chunk_key(table.prefix, first_seq))[:keep]
        for seq, _, _ in reversed(spans):
            key = m.chunk_key(table.prefix, seq)
            self._storage.bucket.delete(key)
            if self._storage.cache is not None:
                self._storage.cache.forget(key)
        table.cut(first_seq)
        if head:
            self._put(first_seq, head)
            table.add(len(head))

    def close(self) -> None:
        with self._lock:
            self._pending = []
            self._pending_bytes = 0
            self._inflight = b""


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
        entry = self._storage._catalog().files.get(name)
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
                while self._storage.merge_next_run(name):
                    pass
            except Fenced:
                log.warning("stopped merging %s: another broker took the prefix over", name)
                return
            except StorageError as exc:
                log.warning("merging %s failed, will try again later: %s", name, exc)

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
