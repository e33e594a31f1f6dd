"""Appendable files on S3 as numbered chunk objects: one PUT per sync.

`ChunkTable` says where each synced chunk starts; `S3AppendFile` is the port's
AppendFile over it, with the care a PUT needs: bytes in flight count in the
size, a cut during a PUT cancels it, and a chunk number whose PUT had no answer
is given up (void), never reused.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING

from brook import layout
from brook.errors import StorageError
from brook.storage.s3 import manifest as m
from brook.storage.s3.merge import RECENT_BYTES_MAX, RUN_CHUNKS_MIN
from brook.storage.s3.objects import Exists

if TYPE_CHECKING:
    from brook.storage.s3 import S3Storage


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
        self.name = name
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
        """Nothing to do: objects need no preallocation."""

    def size(self) -> int:
        with self._lock:
            return self._table.size + len(self._inflight) + self._pending_bytes

    def unsynced(self) -> tuple[int, bytes]:
        """Where the synced chunks end, and the bytes appended after them (in flight and
        pending), taken together: what the owner reads past the chunks."""
        with self._lock:
            if len(self._pending) > 1:
                self._pending = [b"".join(self._pending)]
            tail = self._inflight + (self._pending[0] if self._pending else b"")
            return self._table.size, bytes(tail)

    def sync(self) -> None:
        """PUT what was appended so far as the next chunk. Raises StorageError, or Fenced."""
        if self._storage.fenced.is_set():
            raise self._storage.lost(f"writing {self._name}")
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
        if not self._name.startswith(layout.WAL):  # let go at checkpoints, never merged
            self._storage.merger.consider(self._name, self._table)

    def _put(self, seq: int, data: bytes) -> None:
        """Store chunk `seq`; returns only once the store has it. Raises Fenced or StorageError."""
        if self._storage.fenced.is_set():
            raise self._storage.lost(f"writing {self._name}")
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
                    raise self._storage.lost(f"writing {self._name}") from None
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
        self._storage.void_chunks(self._name, self._table.prefix, [seq])
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
        """Cut durable chunks back to `size`: after a failed sync, the bytes of batches
        synced ahead of their round, or a damaged tail found by recovery.

        Chunks are never deleted or written again: a chunk number is used once, so a
        previous owner's fence and every reader's table stay right, and a crash at any
        step leaves a readable file. The bytes of the first cut chunk that stay (its
        head) are put as the next chunk; then one catalog change gives up every chunk
        from the first cut one up to the head (void). A crash before that change leaves
        the head after the old chunks, where it is past the file's last valid batch and
        so cut again by the next recovery.
        """
        self._settle_unsure()
        table = self._table
        if size < self._storage.entry(self._name).merged_bytes:
            raise StorageError(
                f"{self._name}: cannot cut back to byte {size}, inside chunks already merged"
            )
        spans = table.spans(size, table.size)
        if not spans:
            return
        first_seq, keep, _ = spans[0]
        head = b""
        if keep:
            head = self._storage.fetch(m.chunk_key(table.prefix, first_seq))[:keep]
        end_seq = table.next_seq
        if head:
            self._put(end_seq, head)
        self._storage.void_chunks(self._name, table.prefix, range(first_seq, end_seq))
        for seq in range(first_seq, end_seq):
            table.forget(seq)
        table.cut(first_seq)
        for _ in range(first_seq, end_seq):
            table.add(0)
        if head:
            table.add(len(head))
            if self._storage.cache is not None:
                self._storage.cache.put(m.chunk_key(table.prefix, end_seq), head)

    def close(self) -> None:
        with self._lock:
            self._pending = []
            self._pending_bytes = 0
            self._inflight = b""
        self._storage.appender_closed(self)
