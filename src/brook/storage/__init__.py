"""The storage port: everything Brook keeps goes through this interface.

Names are '/'-separated paths relative to the storage root ("topics/orders/0/...").
Backends: `local` (a directory), `s3` (an S3-compatible bucket prefix), `memory` (tests and
experiments), and the test-only `faulty` wrapper. Every backend passes
tests/storage/test_conformance.py.

Durability contract, the same for every backend:
- `write_atomic`, `create_appendable`, `truncate`, `delete` are durable when they return.
- `AppendFile.append` is not durable until a later `sync` returns, and only synced bytes are
  sure to be read back (the log never reads past what it knows is durable).
- A failing operation raises StorageError; after a failed `sync` nothing written
  since the last successful one may be assumed durable.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol


class ReadFile(Protocol):
    """Random-access reads of one stored file."""

    def read(self, position: int, length: int) -> bytes:
        """Up to `length` bytes from `position`; fewer only at the end of the file."""
        ...

    def size(self) -> int: ...

    def keep(self) -> None:
        """Read this very file until closed, even once another is stored under its
        name (a backend that reopens files by name keeps this one open)."""
        ...

    def close(self) -> None: ...


class AppendFile(Protocol):
    """A file that grows at its end: the active segment."""

    def append(self, parts: Sequence[bytes | memoryview]) -> None:
        """Write `parts` at the end, in order. Not durable until `sync`."""
        ...

    def reserve(self, size: int) -> None:
        """A hint that about `size` more bytes will be appended soon.

        A backend may preallocate space so later syncs need not commit a new
        file size. Never changes what `size()` returns or what is read back.
        """
        ...

    def sync(self) -> None:
        """Make everything appended so far durable, or raise StorageError."""
        ...

    def truncate(self, size: int) -> None:
        """Durably cut the file to `size` bytes (drops a torn or failed tail)."""
        ...

    def size(self) -> int: ...

    def close(self) -> None: ...


class Superseded(Exception):
    """A public file was replaced by someone else since it was read (PublicFiles.replace)."""


class PublicFiles(Protocol):
    """Files stored as themselves under the location, for readers that are not Brook.

    The lake's Parquet files and manifests live here: on S3 as plain objects under
    `<prefix>/<name>` (not in Brook's catalog), in a directory as plain files. Data
    files are created once under a new name and never changed; a commit file (a
    manifest) is replaced conditionally, so a broker fenced by a take-over cannot
    overwrite its successor's (docs/ARCHITECTURE.md, "The lake").
    """

    @property
    def epoch(self) -> int | None:
        """The writer epoch a commit file carries, so a broker that finds a higher one
        knows it was taken over; None where one writer is sure by a lock (a directory)."""
        ...

    def url(self, name: str) -> str:
        """Where a reader outside Brook finds `name` (a path, or an s3:// URL)."""
        ...

    def create(self, name: str, data: bytes) -> None:
        """Durably store a file under a name never used before."""
        ...

    def read(self, name: str) -> tuple[bytes, str] | None:
        """The file and its version (for `replace`), or None when it does not exist."""
        ...

    def replace(self, name: str, data: bytes, version: str | None) -> str:
        """Durably replace `name` if it is still at `version` (None: if it does not
        exist); returns the new version. Raises Superseded when it changed."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Names of the files under `prefix` (a folder path ending in '/'), sorted."""
        ...

    def delete(self, names: Sequence[str]) -> None:
        """Durably remove files; missing ones are not an error."""
        ...

    def delete_prefix(self, prefix: str) -> None:
        """Durably remove every file under `prefix`."""
        ...


class Storage(Protocol):
    """One storage location, owned by one broker at a time."""

    fenced: threading.Event
    """Set once another broker has taken the location over (S3): from then on this one
    must write nothing more. Never set where ownership is a lock (a local directory)."""

    open_threads: int
    """How many start-up reads are worth waiting on at once (side_by_side.py): 1 where
    reads are the interpreter's work (a disk, memory), more where each waits on the
    network (S3)."""

    def public(self) -> PublicFiles:
        """The location's public files (the lake's)."""
        ...

    def lock(self) -> None:
        """Take exclusive ownership of the location or raise Locked."""
        ...

    def attach(self) -> None:
        """Open the location to read only, beside an owner that may be writing: take
        no lock, write nothing, disturb nobody (`brook.open(..., read_only=True)`)."""
        ...

    def create_appendable(self, name: str, initial: bytes) -> AppendFile:
        """Durably create `name` holding `initial` and open it for appending."""
        ...

    def open_appendable(self, name: str) -> AppendFile:
        """Open an existing file for appending (after recovery)."""
        ...

    def open_read(self, name: str) -> ReadFile: ...

    def read_all(self, name: str) -> bytes | None:
        """The whole file, or None when it does not exist."""
        ...

    def write_atomic(self, name: str, data: bytes) -> None:
        """Durably replace `name` with `data`: readers see the old or the new, never a mix."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Names of all files under `prefix` (a folder path ending in '/'), sorted."""
        ...

    def write_hint(self, name: str, data: bytes) -> None:
        """Replace the small file `name` with `data` for readers outside this broker,
        without making it durable, and without raising: a hint may be lost or stale.

        The log writes one per partition after each sync, saying how much of the
        active segment is acknowledged (docs/FORMAT.md, "Durable mark"), so a reader
        in another process (Spark) never reads a batch that may still be cut back.
        A backend whose outside readers can see only synced data anyway may ignore it.
        """
        ...

    def delete(self, name: str) -> None:
        """Durably remove `name`; removing a missing file is not an error."""
        ...

    def delete_prefix(self, prefix: str) -> None:
        """Durably remove every file under `prefix`."""
        ...

    def close(self) -> None:
        """Release the lock and any open handles."""
        ...


def check_name(name: str) -> str:
    """Refuse names that could escape the storage root; returns the name.

    Names are built by Brook from validated topic and group names, so a bad one
    is a bug, not user input.
    """
    assert name and all(p not in ("", ".", "..") for p in name.split("/")), f"bad name {name!r}"
    return name
