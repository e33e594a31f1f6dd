"""The write-ahead log: a commit round made durable by one write and one sync,
however many partitions, status logs and books it touched (SPEC §0).

The committer writes each round's batches to their partitions' segments without a
sync, and the same bytes to the WAL as one entry per partition (codec/wal.py); one
`sync` of the WAL then makes the whole round durable. Segments are made durable later
by a checkpoint (commit/checkpoint.py), which records the WAL position they cover
(`wal/checkpoint.json`); WAL files wholly behind it are deleted. After a crash the
broker replays the entries past the checkpoint into the segments before it serves
(log/replay.py), so the WAL is bounded by what checkpoints have not covered yet.

Positions count bytes over the whole WAL and are never reused: a file is named by the
position of its first byte, and every entry carries its own position in its checksum,
so bytes of an older use of the space never pass for an entry.

Failures: a failed append or sync marks the WAL broken and moves it to a new
generation. Rounds written under an older generation are never acknowledged (their
callers get StorageError), and nothing is appended until `repair` has cut the file
back to its last synced byte, durably, once the committer has answered every round
in flight. So an entry of a round whose callers got an error never survives to be
replayed beside the round that took its offsets afterwards.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from brook import layout, limits
from brook.codec.wal import (
    KIND_BATCHES,
    KIND_TOPIC_DROPPED,
    WAL_FILE_HEADER_BYTES,
    Entry,
    decode_file_header,
    encode_entry,
    encode_file_header,
    scan_entries,
)
from brook.errors import CorruptData, StorageError
from brook.storage import AppendFile, Storage

log = logging.getLogger("brook.wal")


class Checkpoint(msgspec.Struct, forbid_unknown_fields=False):
    """wal/checkpoint.json: every segment holds, durably, what the WAL held before `position`."""

    position: int
    written_ms: int = 0


class Piece(NamedTuple):
    """One partition's share of a round, as the committer hands it to `append`."""

    topic: str
    partition: int
    base: int
    next: int
    parts: Sequence[bytes | memoryview]


class Appended(NamedTuple):
    generation: int
    end: int
    """The WAL position after the round: it is durable once `synced` reaches it."""


class Recovered(NamedTuple):
    checkpoint: int
    entries: list[Entry]
    """Every valid entry past the checkpoint, in order."""
    end: int
    """Where the valid entries end: the next round's position."""
    problem: str | None
    """Why the scan stopped before the end of the last file (a torn round), if it did."""


class _File(NamedTuple):
    start: int
    name: str
    appender: AppendFile


def read_checkpoint(storage: Storage) -> int:
    """The position of the last checkpoint (0 when none was written). Raises CorruptData."""
    raw = storage.read_all(layout.WAL_CHECKPOINT)
    if raw is None:
        return 0
    try:
        return msgspec.json.decode(raw, type=Checkpoint).position
    except msgspec.DecodeError as exc:
        raise CorruptData(f"{layout.WAL_CHECKPOINT}: {exc}") from None


def wal_files(storage: Storage) -> list[str]:
    """The WAL's files, oldest first."""
    return sorted(n for n in storage.list(layout.WAL) if n.endswith(layout.WAL_SUFFIX))


def recover(storage: Storage) -> Recovered:
    """Read what the WAL holds past its checkpoint; changes nothing.

    Files end where their entries end; only the last may end in a torn round (a file is
    synced whole before the next one begins), so a gap between files is damage and
    raises CorruptData, as does a file whose header is not valid.
    """
    checkpoint = read_checkpoint(storage)
    entries: list[Entry] = []
    end = checkpoint
    problem = None
    names = wal_files(storage)
    for i, name in enumerate(names):
        start = layout.wal_file_start(name)
        following = layout.wal_file_start(names[i + 1]) if i + 1 < len(names) else None
        if following is not None and following <= checkpoint:
            continue  # wholly behind the checkpoint: deleted once it was written
        reader = storage.open_read(name)
        try:
            size = reader.size()
            head = reader.read(0, WAL_FILE_HEADER_BYTES)
            # Only what lies past the checkpoint is read: on object storage the file is
            # a chunk per round, and a clean stop leaves all of it behind the checkpoint.
            skip = max(WAL_FILE_HEADER_BYTES, min(checkpoint - start, size))
            data = head + bytes(skip - len(head)) + reader.read(skip, size - skip)
        finally:
            reader.close()
        header = decode_file_header(data)
        if isinstance(header, str) and following is None and start >= end:
            # A crash while the last file was being made: it never held an entry.
            problem = f"{name}: {header}"
            break
        if isinstance(header, str) or header.start != start:
            raise CorruptData(f"{name}: {header if isinstance(header, str) else 'start mismatch'}")
        if entries or start > checkpoint:
            if start != end:
                raise CorruptData(
                    f"{name} begins at WAL position {start}, but the entries before it end at {end}"
                )
            at = WAL_FILE_HEADER_BYTES
        else:
            at = max(WAL_FILE_HEADER_BYTES, checkpoint - start)
        scan = scan_entries(data, at, start + at)
        entries.extend(scan.entries)
        end = scan.end
        problem = scan.problem
        if problem is not None and following is not None:
            raise CorruptData(f"{name}: {problem}, and later files follow it")
    return Recovered(checkpoint, entries, end, problem)


class WriteAheadLog:
    """The WAL of one broker, opened for writing at `start` (after `recover`)."""

    def __init__(self, storage: Storage, file_bytes_max: int = limits.wal_file_bytes_max) -> None:
        self.storage = storage
        self.file_bytes_max = file_bytes_max
        self._lock = threading.Lock()
        self._files: list[_File] = []
        """Oldest first; the last is written. Closed when a checkpoint deletes them."""
        self._end = 0
        self._synced = 0
        self.checkpointed = 0
        """The position of the last checkpoint written."""
        self._generation = 0
        self.broken: str | None = None
        """Why appends are refused until `repair`, or None."""
        self.syncs = 0
        self.bytes_written = 0

    # ------------------------------------------------------------ start and stop

    def start(self, end: int, now_ms: int) -> None:
        """Begin writing at position `end`: write a checkpoint there (every entry before
        it must be in durable segments by now), delete the older files, start a file."""
        self._end = self._synced = end
        self.write_checkpoint(end, now_ms)
        self._begin_file(now_ms)

    def close(self) -> None:
        for file in self._files:
            file.appender.close()
        self._files = []

    # ------------------------------------------------------------ the committer's side

    @property
    def end(self) -> int:
        return self._end

    @property
    def synced(self) -> int:
        """Every entry before this position is durable."""
        return self._synced

    @property
    def generation(self) -> int:
        return self._generation

    def append(self, pieces: Sequence[Piece], now_ms: int) -> Appended:
        """Write a round's entries in one write, without syncing. Raises StorageError
        (the WAL is then broken: `repair` before the next append)."""
        with self._lock:
            if self.broken is not None:
                raise StorageError(f"the write-ahead log is failing: {self.broken}")
            try:
                if self._files[-1].appender.size() >= self.file_bytes_max:
                    self._roll(now_ms)
                parts: list[bytes | memoryview] = []
                position = self._end
                for piece in pieces:
                    entry = encode_entry(
                        position,
                        KIND_BATCHES,
                        piece.topic,
                        piece.partition,
                        piece.base,
                        piece.next,
                        piece.parts,
                    )
                    position += sum(map(len, entry))
                    parts.extend(entry)
                appender = self._files[-1].appender
                appender.reserve(position - self._end)
                appender.append(parts)
            except StorageError as exc:
                self._break(exc)
                raise
            self.bytes_written += position - self._end
            self._end = position
            return Appended(self._generation, position)

    def topic_dropped(self, topic: str, now_ms: int) -> None:
        """Durably record that `topic` was deleted (with the writer role, nothing in
        flight): replay then skips its earlier entries, even when a topic of the same
        name is made again. Raises StorageError."""
        with self._lock:
            if self.broken is not None:
                raise StorageError(f"the write-ahead log is failing: {self.broken}")
            entry = encode_entry(self._end, KIND_TOPIC_DROPPED, topic, 0, 0, 0)
            try:
                self._files[-1].appender.append(entry)
            except StorageError as exc:
                self._break(exc)
                raise
            self._end += sum(map(len, entry))
        self.sync()

    def sync(self) -> int:
        """Make every entry appended so far durable; returns the position synced to.
        Raises StorageError (the WAL is then broken)."""
        with self._lock:
            if self.broken is not None:
                raise StorageError(f"the write-ahead log is failing: {self.broken}")
            appender, end, generation = self._files[-1].appender, self._end, self._generation
        try:
            appender.sync()
        except StorageError as exc:
            with self._lock:
                if generation == self._generation:
                    self._break(exc)
            raise
        with self._lock:
            self.syncs += 1
            if generation != self._generation:
                raise StorageError(f"the write-ahead log failed meanwhile: {self.broken}")
            self._synced = max(self._synced, end)
            return self._synced

    def repair(self) -> None:
        """Cut the WAL back to its last synced byte, durably, so no entry of an
        unacknowledged round survives; then appends go on. Only once every round
        written before the failure is answered. Raises StorageError (still broken)."""
        with self._lock:
            if self.broken is None:
                return
            file = self._files[-1]
            cut = self._synced - file.start
            assert cut >= WAL_FILE_HEADER_BYTES, "a file begins synced"
            file.appender.truncate(cut)
            self._end = file.start + cut
            self._synced = min(self._synced, self._end)
            log.warning("write-ahead log repaired: cut back to position %d", self._end)
            self.broken = None

    def _break(self, exc: StorageError) -> None:
        self.broken = exc.message
        self._generation += 1

    def _roll(self, now_ms: int) -> None:
        """Sync the full file whole, then begin the next (lock held): only the last
        file can end in a torn round."""
        full = self._files[-1].appender
        full.sync()
        full.truncate(full.size())  # its reserved tail: a full file takes no more than it holds
        self.syncs += 1
        self._synced = self._end
        self._begin_file(now_ms)

    def _begin_file(self, now_ms: int) -> None:
        name = layout.wal_file(self._end)
        header = encode_file_header(self._end, now_ms)
        appender = self.storage.create_appendable(name, header)
        self._files.append(_File(self._end, name, appender))
        # The header is the file's first bytes of the WAL's positions; it is durable
        # once made, and everything before it was synced first (start, _roll).
        assert self._synced == self._end, "a file begins only after the last is synced"
        self._end += len(header)
        self._synced = self._end

    # ------------------------------------------------------------ checkpoints

    @property
    def bytes_since_checkpoint(self) -> int:
        return self._end - self.checkpointed

    def write_checkpoint(self, position: int, now_ms: int) -> None:
        """Record that segments hold every entry before `position` durably, then
        delete the files wholly behind it. Raises StorageError."""
        self.storage.write_atomic(
            layout.WAL_CHECKPOINT, msgspec.json.encode(Checkpoint(position, now_ms))
        )
        self.checkpointed = position
        with self._lock:
            behind = [
                f for i, f in enumerate(self._files[:-1]) if self._files[i + 1].start <= position
            ]
            self._files = self._files[len(behind) :]
        for file in behind:
            file.appender.close()
        known = {f.name for f in self._files}
        for name in wal_files(self.storage):
            if name in known:
                continue
            if layout.wal_file_start(name) < position:
                self.storage.delete(name)


def wal_bodies(entries: list[Entry], topic: str, partition: int) -> list[memoryview]:
    """The batches the entries hold for one partition, in order, since the topic was last
    dropped (an older topic of the same name is not this one)."""
    bodies: list[memoryview] = []
    for entry in entries:
        if entry.topic != topic and entry.kind != KIND_TOPIC_DROPPED:
            continue
        if entry.kind == KIND_TOPIC_DROPPED and (
            entry.topic == topic or topic.startswith(entry.topic + "/")
        ):
            bodies = []
        elif entry.kind == KIND_BATCHES and entry.topic == topic and entry.partition == partition:
            bodies.append(entry.body)
    return bodies
