"""S3-compatible object storage behind the storage port: the bucket is the database.

Everything lives under one prefix: the manifest (catalog, writer epoch and the
owner's lease, see manifest.py and lease.py), immutable whole-file objects, and
the numbered chunk objects of appendable files. A sync of an appendable file is
one PUT of the bytes appended since the last sync, and returns only once the
store has answered 200 OK; nothing is acknowledged before.

One writer per prefix (SPEC §0). `lock` takes the prefix over, in this order:
1. check that the store honours conditional writes (probe.py);
2. raise the epoch in the manifest with If-Match, taking the lease: refused
   with Locked while another broker's lease is live, unless `take_over`
   (after announcing a claim, so a busy owner lets the change through);
3. fence every appendable file (fence.py) before reading any of it.
From 2 on, the previous owner's catalog changes fail (If-Match on a manifest
it no longer has); from 3 on, its chunk PUTs fail (the fence holds the number).
Both raise Fenced, and nothing it writes afterwards is ever read. What it
acknowledged before was in the manifest or below the fence, so the new owner
reads all of it. The owner renews its lease while it runs (a thread) and
releases it on close, so the next broker need not wait.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec

from brook import limits
from brook.errors import BadRequest, BrookError, Fenced, StorageError
from brook.storage import check_name
from brook.storage.s3 import lease as ls
from brook.storage.s3 import manifest as m
from brook.storage.s3.cache import ObjectCache
from brook.storage.s3.chunks import ChunkTable, S3AppendFile
from brook.storage.s3.fence import FENCE_WIDTH_FIRST, fence_file
from brook.storage.s3.merge import Merger
from brook.storage.s3.objects import Bucket, Changed, Exists, MissingObject, fenced
from brook.storage.s3.owner import Ownership, unchanged
from brook.storage.s3.probe import PROBE_PREFIX, check_conditional_writes
from brook.storage.s3.public import S3PublicFiles
from brook.supervisor import Supervisor

log = logging.getLogger("brook.storage.s3")


class S3Storage:
    open_threads = 16
    """Start-up reads side by side (side_by_side.py): each waits on requests."""

    write_ahead_log = False
    """With `write_ahead_log=True`, a commit round is one PUT: a chunk of the write-ahead log
    holding every partition's batches of the round (log/wal.py); segments are PUT by
    checkpoints, and the owner reads what its appenders hold unsynced (`open_read`), as a
    directory's page cache would. Off by default: Spark's reader and the lake read segments
    only, so they would trail the owner by a checkpoint interval (docs/ARCHITECTURE.md)."""

    def __init__(
        self,
        url: str,
        endpoint_url: str | None = None,
        region: str | None = None,
        cache_dir: str | Path | None = None,
        cache_bytes: int = limits.cache_bytes_default,
        request_timeout_s: float = limits.object_request_timeout_s_default,
        take_over: bool = False,
        wait_for_lease: bool = False,
        lease_ms: int = ls.lease_ms_default,
        clock: Callable[[], float] = time.time,
        write_ahead_log: bool = False,
    ) -> None:
        """`take_over`: take the prefix even from a live owner (a rolling deploy).
        `wait_for_lease`: wait for a lease that is not being renewed to run out (a
        crashed owner) instead of raising Locked; a renewed lease still raises."""
        if (
            isinstance(lease_ms, bool)
            or not isinstance(lease_ms, int)
            or lease_ms < ls.lease_ms_min
        ):
            raise BadRequest(
                f"lease_ms must be a whole number of ms from {ls.lease_ms_min}, not {lease_ms!r}"
            )
        self.write_ahead_log = bool(write_ahead_log)
        self.bucket = Bucket(url, endpoint_url, region, request_timeout_s)
        self.cache = ObjectCache(Path(cache_dir), cache_bytes) if cache_dir is not None else None
        self.supervisor = Supervisor()
        """Reports the lease and merge loops' failures; the broker puts its own here."""
        self.owner = Ownership(self, take_over, wait_for_lease, lease_ms, clock)
        self._mutex = threading.Lock()
        """Guards the manifest, its ETag and the chunk tables."""
        self._manifest: m.Manifest | None = None
        self._etag = ""
        self._unsettled: tuple[bytes, m.Manifest] | None = None
        """A manifest write whose outcome could not be learned (its bytes, its catalog)."""
        self._ids = itertools.count()
        self._tables: dict[str, ChunkTable] = {}
        self._hints: dict[str, bytes] = {}
        """Hints (durable marks) as this broker wrote them: kept in memory only."""
        self._appenders: dict[str, S3AppendFile] = {}
        """Appendable files open for appending in this broker, by name."""
        self.merger = Merger(self)
        self.requests = ThreadPoolExecutor(
            limits.s3_requests_in_flight_max, thread_name_prefix="brook-s3"
        )
        self.fenced = threading.Event()
        """Set once another broker has taken the prefix over: this one can never write again."""
        self.read_only = False
        """Attached as an outside reader (`attach`): never writes, never takes the prefix over."""

    # ------------------------------------------------------------ ownership

    def lock(self) -> None:
        """Take the prefix over (see the module's docstring); returns once every file
        is fenced. Raises Locked while another broker's lease is live (unless
        `take_over`), StorageError if the store cannot be used safely or fails."""
        check_conditional_writes(self.bucket, f"{PROBE_PREFIX}{self.owner.id}")
        manifest, etag = self.owner.take()
        with self._mutex:
            self._manifest, self._etag = manifest, etag
        chunked = [(n, e) for n, e in manifest.files.items() if e.chunks is not None]
        # Released: its owner closed and writes nothing more; one number fences each file.
        width = 1 if self.owner.took_released else FENCE_WIDTH_FIRST
        try:
            listed = self.load_tables([e for _, e in chunked])
            with ThreadPoolExecutor(
                limits.s3_requests_in_flight_max, thread_name_prefix="brook-fence"
            ) as pool:
                tables = list(
                    pool.map(
                        lambda ne, table: fence_file(
                            self, ne[0], ne[1], self.requests, table, width
                        ),
                        chunked,
                        listed,
                    )
                )
        except BrookError:
            with contextlib.suppress(BrookError):  # nothing is served: let the next one in
                self.change(unchanged, release=True)
            raise
        with self._mutex:
            self._tables = {name: t for (name, _), t in zip(chunked, tables, strict=True)}
        self.owner.start_keeping()
        log.info(
            "took over %s as writer epoch %d (%d appendable files fenced)",
            self.bucket.url,
            manifest.epoch,
            len(chunked),
        )

    def public(self) -> S3PublicFiles:
        """The lake's files: plain objects under the prefix, outside the catalog."""
        return S3PublicFiles(self.bucket, self._public_epoch)

    def _public_epoch(self) -> int | None:
        return None if self.read_only else self.catalog().epoch

    def attach(self) -> None:
        """Read the prefix as an outside reader, beside the broker that owns it (Spark,
        read-only opens): load the catalog without taking the prefix over, and never
        write. Raises StorageError."""
        self.read_only = True
        self.refresh()

    def refresh(self) -> None:
        """Load the catalog again, as a reader attached with `attach` (chunks merged
        meanwhile are found in their runs). Raises StorageError."""
        assert self.read_only, "the owner's catalog is always current"
        found = self.bucket.get(m.MANIFEST_KEY)
        if found is None:
            self.bucket.list("")  # StorageError naming the bucket when it does not exist
            raise StorageError(f"{self.bucket.url}: no Brook data here (no {m.MANIFEST_KEY})")
        try:
            manifest = m.decode(found[0])
        except ValueError as exc:
            raise StorageError(f"{self.bucket.url}: {exc}") from None
        with self._mutex:
            self._manifest = manifest
            self._tables.clear()

    def lost(self, what: str) -> Fenced:
        """The error for a write refused because another broker took over; remembers it."""
        if not self.fenced.is_set():
            log.error("%s: another broker has taken over %s", what, self.bucket.url)
        self.fenced.set()
        return fenced(what)

    def catalog(self) -> m.Manifest:
        assert self._manifest is not None, "lock() first"
        return self._manifest

    def new_name(self, kind: str) -> str:
        return f"{kind}/{self.catalog().epoch}-{next(self._ids)}"

    def change(self, edit: Callable[[dict[str, m.Entry]], None], release: bool = False) -> None:
        """Apply `edit` to the catalog and write the manifest (If-Match), renewing the
        lease (or releasing it). Raises Fenced if another broker has taken over,
        StorageError if the write failed."""
        assert not self.read_only, "an attached reader never writes"
        self.owner.hold_for_claim()
        with self._mutex:
            if self.fenced.is_set():
                raise self.lost("changing the catalog")
            for _ in range(2):
                changed = m.copy(self.catalog())
                edit(changed.files)
                changed.lease = self.owner.lease(released=release)
                raw = m.encode(changed)
                try:
                    self._etag = self.bucket.replace(m.MANIFEST_KEY, raw, self._etag)
                    self._manifest = changed
                    self.owner.written(edit)
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
            raise self.lost("changing the catalog")
        if isinstance(failure, StorageError):
            raise failure
        raise StorageError(f"{self.bucket.url}: the manifest could not be written")

    # ------------------------------------------------------------ objects

    def fetch(self, key: str) -> bytes:
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

    def create_own(self, key: str, data: bytes) -> None:
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
                # Fences (empty chunks a take-over put) stay: a fenced broker that still
                # runs must find its next chunk number taken even once the file is gone,
                # or a write-ahead log chunk it PUTs there would look durable to it.
                keys = [key for key, size in self.bucket.list(entry.chunks) if size]
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
        if len(data) <= limits.s3_inline_bytes_max:
            entry = m.Entry(data=bytes(data), size=len(data))
        else:
            key = self.new_name("objects")
            self.create_own(key, data)
            entry = m.Entry(key=key, size=len(data))
        old = self.catalog().files.get(name)

        def put(files: dict[str, m.Entry]) -> None:
            files[name] = entry

        self.change(put)
        if old is not None:
            self._delete_objects(old)

    def read_all(self, name: str) -> bytes | None:
        with self._mutex:
            hint = self._hints.get(name)
        if hint is not None:
            return hint
        entry = self.catalog().files.get(name)
        if entry is None:
            return None
        if entry.data is not None:
            return entry.data
        reader = S3ReadFile(self, name)
        return reader.read(0, reader.size())

    def create_appendable(self, name: str, initial: bytes) -> S3AppendFile:
        check_name(name)
        prefix = self.new_name(m.CHUNKS) + "/"
        self.create_own(m.chunk_key(prefix, 0), initial)
        old = self.catalog().files.get(name)

        def add(files: dict[str, m.Entry]) -> None:
            files[name] = m.Entry(chunks=prefix)

        self.change(add)
        if old is not None:
            self._delete_objects(old)
        table = ChunkTable(prefix, [len(initial)])
        with self._mutex:
            self._tables[name] = table
        return self._appending(S3AppendFile(self, name, table))

    def _appending(self, appender: S3AppendFile) -> S3AppendFile:
        with self._mutex:
            self._appenders[appender.name] = appender
        return appender

    def appender_closed(self, appender: S3AppendFile) -> None:
        with self._mutex:
            if self._appenders.get(appender.name) is appender:
                del self._appenders[appender.name]

    def appender(self, name: str) -> S3AppendFile | None:
        """The file's appender in this broker, whose unsynced bytes its reads include."""
        with self._mutex:
            return self._appenders.get(name)

    def open_appendable(self, name: str) -> S3AppendFile:
        """Open an appendable file for appending: its table as `lock` fenced it."""
        entry = self.entry(name)
        if entry.chunks is None:
            raise StorageError(f"{name} is not an appendable file")
        with self._mutex:
            table = self._tables.get(name)
        if table is None or table.prefix != entry.chunks:
            table = fence_file(self, name, entry, self.requests)
            with self._mutex:
                self._tables[name] = table
        return self._appending(S3AppendFile(self, name, table))

    def void_chunks(self, name: str, prefix: str, seqs: Sequence[int]) -> None:
        """Record that chunks `seqs` of `name` hold nothing of the file, whatever is or
        lands there (one catalog change). Raises Fenced, StorageError."""
        if not seqs:
            return

        def void(files: dict[str, m.Entry]) -> None:
            entry = files.get(name)
            if entry is None or entry.chunks != prefix:
                raise StorageError(f"{name} changed while one of its chunks was being given up")
            given_up = sorted({*entry.void, *seqs})
            files[name] = msgspec.structs.replace(entry, void=tuple(given_up))

        self.change(void)

    def entry(self, name: str) -> m.Entry:
        entry = self.catalog().files.get(name)
        if entry is None:
            raise StorageError(f"opening {name} failed: no such file")
        return entry

    def load_table(self, entry: m.Entry) -> ChunkTable:
        """The chunks of a file after its runs, numbered with no gap (chunks after a gap
        were never synced; chunks already merged may linger until deleted). A void
        chunk counts as empty, whether or not something landed there."""
        assert entry.chunks is not None
        return _table(entry, self.bucket.list(entry.chunks))

    def load_tables(self, entries: Sequence[m.Entry]) -> list[ChunkTable]:
        """The chunk tables of many appendable files, in the order given, from one listing
        of their chunks cut into slices read side by side: at start, a listing per file
        would be a request per topic (10,000 topics, 10,000 LISTs)."""
        prefixes = sorted({e.chunks for e in entries if e.chunks is not None})
        slices = [
            prefixes[at : at + limits.s3_listing_slice_files]
            for at in range(0, len(prefixes), limits.s3_listing_slice_files)
        ]
        found: dict[str, list[tuple[str, int]]] = {prefix: [] for prefix in prefixes}

        def list_slice(files: list[str]) -> list[tuple[str, int]]:
            return self.bucket.list_slice(m.CHUNKS, files[0], files[-1])

        for listed in self.requests.map(list_slice, slices):
            for key, size in listed:
                chunks = key[: key.rindex("/") + 1]
                if chunks in found:
                    found[chunks].append((key, size))
        return [_table(e, found[e.chunks]) for e in entries if e.chunks is not None]

    def table(self, name: str, entry: m.Entry) -> ChunkTable:
        """The chunk table of an appendable file: the live one if this broker holds it."""
        assert entry.chunks is not None
        with self._mutex:
            table = self._tables.get(name)
        if table is None or table.prefix != entry.chunks:
            table = self.load_table(entry)
            with self._mutex:
                self._tables[name] = table
        return table

    def open_read(self, name: str) -> S3ReadFile:
        self.entry(name)
        return S3ReadFile(self, name)

    def write_hint(self, name: str, data: bytes) -> None:
        """Kept in memory, never stored (a PUT per round for a hint would double the
        requests): the owner's own readers read past the synced chunks (a file's bytes
        in flight and pending), so they need its durable mark to stop at what was
        acknowledged. Readers elsewhere find none and read only synced chunks."""
        with self._mutex:
            self._hints[name] = data

    def list(self, prefix: str) -> list[str]:
        return sorted(n for n in self.catalog().files if n.startswith(prefix))

    def delete(self, name: str) -> None:
        self._remove(lambda n: n == name)

    def delete_prefix(self, prefix: str) -> None:
        self._remove(lambda n: n.startswith(prefix))

    def _remove(self, chosen: Callable[[str], bool]) -> None:
        with self._mutex:
            for name in [n for n in self._hints if chosen(n)]:
                del self._hints[name]
        gone = {n: e for n, e in self.catalog().files.items() if chosen(n)}
        if not gone:
            return

        def drop(files: dict[str, m.Entry]) -> None:
            for name in gone:
                files.pop(name, None)

        self.change(drop)
        with self._mutex:
            for name in gone:
                self._tables.pop(name, None)
        for entry in gone.values():
            self._delete_objects(entry)

    def close(self) -> None:
        """Stop merging and renewing, then release the lease (an owner that closed
        cleanly lets the next broker in at once). Never raises."""
        self.merger.close()
        if self.owner.stop_keeping() and not self.fenced.is_set():
            try:
                self.change(unchanged, release=True)
            except BrookError as exc:
                log.warning(
                    "could not release the lease on %s (it runs out in %d ms): %s",
                    self.bucket.url,
                    self.owner.lease_ms,
                    exc,
                )
        self.requests.shutdown(wait=True)

    def fetch_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object: from the cached whole object where there is
        a cache (fetched whole into it on a miss, for the reads that follow), else one
        ranged GET of exactly those bytes (an outside reader such as a Spark task)."""
        if self.cache is not None:
            return self.fetch(key)[start:end]
        return self.bucket.get_range(key, start, end)

    def fetch_ranges(self, pieces: Sequence[tuple[str, int, int]]) -> builtins.list[bytes]:
        """`fetch_range` of each (key, start, end), several at once."""
        if len(pieces) <= 1:
            return [self.fetch_range(*piece) for piece in pieces]
        return list(self.requests.map(lambda piece: self.fetch_range(*piece), pieces))

    def fetch_many(self, keys: Sequence[str]) -> builtins.list[bytes]:
        """`fetch` of each key, several at once: a cold read of many chunks is not
        one round trip after another."""
        if len(keys) <= 1:
            return [self.fetch(key) for key in keys]
        return list(self.requests.map(self.fetch, keys))


class S3ReadFile:
    """Reads of one file through the catalog, so a file rewritten meanwhile reads whole."""

    def __init__(self, storage: S3Storage, name: str) -> None:
        self._storage = storage
        self._name = name

    def _now(self) -> m.Entry:
        return self._storage.entry(self._name)

    def keep(self) -> None:
        """Nothing held: reads go through the catalog as it stands (a rewrite is
        read whole), and no descriptor is open between them."""

    def read(self, position: int, length: int) -> bytes:
        for _ in range(limits.s3_read_attempts_max - 1):
            try:
                return self._read(self._now(), position, length)
            except MissingObject:
                # Chunks merged into a run meanwhile: look again (an outside reader
                # learns of the run from the manifest).
                if self._storage.read_only:
                    self._storage.refresh()
                continue
        return self._read(self._now(), position, length)

    def _read(self, entry: m.Entry, position: int, length: int) -> bytes:
        if entry.data is not None:
            return entry.data[position : position + length]
        if entry.key is not None:
            end = min(position + length, entry.size)
            if position >= end:
                return b""
            return self._storage.fetch_range(entry.key, position, end)
        table = self._storage.table(self._name, entry)
        appender = self._storage.appender(self._name)
        if appender is not None:
            synced, unsynced = appender.unsynced()
            if position + length > synced:
                head = self._read_synced(entry, table, position, min(position + length, synced))
                at = max(position, synced) - synced
                return head + unsynced[at : at + position + length - max(position, synced)]
        return self._read_synced(entry, table, position, position + length)

    def _read_synced(self, entry: m.Entry, table: ChunkTable, position: int, until: int) -> bytes:
        end = min(until, table.size)
        if position >= end:
            return b""
        pieces: list[tuple[str, int, int]] = []
        at = 0
        for run in entry.runs:
            if position < at + run.size and at < end:
                pieces.append((run.key, max(position, at) - at, min(end, at + run.size) - at))
            at += run.size
        for seq, start, stop in table.spans(max(position, at), end):
            pieces.append((m.chunk_key(table.prefix, seq), start, stop))
        return b"".join(self._storage.fetch_ranges(pieces))

    def boundaries(self) -> builtins.list[int]:
        """Positions where a run or a chunk starts: each is a batch boundary (a sync
        writes whole batches), known without reading a byte of the file."""
        entry = self._now()
        if entry.chunks is None:
            return []
        out = []
        at = 0
        for run in entry.runs:
            out.append(at)
            at += run.size
        table = self._storage.table(self._name, entry)
        out.extend(start for start, size in zip(table.starts, table.sizes, strict=True) if size)
        return out

    def size(self) -> int:
        entry = self._now()
        if entry.chunks is not None:
            appender = self._storage.appender(self._name)
            if appender is not None:
                return appender.size()
            return self._storage.table(self._name, entry).size
        return entry.size

    def close(self) -> None:
        pass


def _table(entry: m.Entry, listed: list[tuple[str, int]]) -> ChunkTable:
    """An appendable file's chunks after its runs, numbered with no gap, from the
    listing of its chunk prefix (see S3Storage.load_table)."""
    assert entry.chunks is not None
    first = entry.merged_chunks
    found = {m.chunk_seq(key): size for key, size in listed}
    void = set(entry.void)
    sizes: list[int] = []
    seq = first
    while seq in found or seq in void:
        sizes.append(0 if seq in void else found[seq])
        seq += 1
    return ChunkTable(entry.chunks, sizes, first, entry.merged_bytes)
