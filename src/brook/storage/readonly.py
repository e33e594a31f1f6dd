"""A storage opened to look, never to change: `brook.open(..., read_only=True)`.

The inner storage is attached (`Storage.attach`): no lock, no lease, no
take-over, so the broker that owns the location goes on undisturbed. Every
call that would change what is stored raises ReadOnly, whatever code path
makes it, so "a read-only open writes nothing" holds by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from brook.errors import ReadOnly
from brook.storage import AppendFile, PublicFiles, ReadFile, Storage


def _refused(what: str) -> ReadOnly:
    return ReadOnly(
        f"cannot {what}: this broker was opened read-only (read_only=True); "
        "write through the broker that owns the storage (its HTTP API, brook --url ...)"
    )


class ReadOnlyPublicFiles:
    """Reads pass through; writes raise ReadOnly."""

    epoch = None

    def __init__(self, inner: PublicFiles) -> None:
        self.inner = inner

    def url(self, name: str) -> str:
        return self.inner.url(name)

    def create(self, name: str, data: bytes) -> None:
        raise _refused(f"write {name}")

    def read(self, name: str) -> tuple[bytes, str] | None:
        return self.inner.read(name)

    def replace(self, name: str, data: bytes, version: str | None) -> str:
        raise _refused(f"write {name}")

    def list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)

    def delete(self, names: Sequence[str]) -> None:
        raise _refused(f"delete {', '.join(names)}")

    def delete_prefix(self, prefix: str) -> None:
        raise _refused(f"delete {prefix}")


class ReadOnlyStorage:
    """Reads pass through to `inner`; writes raise ReadOnly; hints are dropped."""

    read_only = True

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.fenced = inner.fenced
        self.open_threads = inner.open_threads

    @property
    def write_ahead_log(self) -> bool:
        """Whether the owner keeps one: a reader then reads it too (Core._read_wal)."""
        return bool(getattr(self.inner, "write_ahead_log", False))

    def lock(self) -> None:
        raise _refused("take ownership")

    def public(self) -> ReadOnlyPublicFiles:
        return ReadOnlyPublicFiles(self.inner.public())

    def attach(self) -> None:
        self.inner.attach()

    def refresh(self) -> None:
        """Look at object storage's catalog again (a directory is always current)."""
        refresh: Callable[[], None] | None = getattr(self.inner, "refresh", None)
        if refresh is not None:
            refresh()

    def create_appendable(self, name: str, initial: bytes) -> AppendFile:
        raise _refused(f"create {name}")

    def open_appendable(self, name: str) -> AppendFile:
        raise _refused(f"append to {name}")

    def open_read(self, name: str) -> ReadFile:
        return self.inner.open_read(name)

    def read_all(self, name: str) -> bytes | None:
        return self.inner.read_all(name)

    def write_atomic(self, name: str, data: bytes) -> None:
        raise _refused(f"write {name}")

    def list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)

    def write_hint(self, name: str, data: bytes) -> None:
        """Dropped: hints are for readers of what an owner writes."""

    def delete(self, name: str) -> None:
        raise _refused(f"delete {name}")

    def delete_prefix(self, prefix: str) -> None:
        raise _refused(f"delete {prefix}")

    def close(self) -> None:
        self.inner.close()
