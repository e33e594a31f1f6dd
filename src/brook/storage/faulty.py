"""A test-only wrapper that makes any storage fail on cue.

Faults are switched on and off by tests: a full disk (appends write part of
their bytes, then fail with ENOSPC, as a real short write does), failing
fsyncs (EIO), and failing creates. The wrapped storage is otherwise used as is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from brook.errors import StorageError
from brook.storage import AppendFile, PublicFiles, ReadFile, Storage


class Faults:
    """The switches. `sync_failures` counts down: each failing sync uses one."""

    def __init__(self) -> None:
        self.disk_full = False
        self.sync_failures = 0
        self.create_failures = 0
        """Creates of appendable files that fail (as a full directory or a lost answer would)."""
        self.read_delay_s = 0.0
        """Every read of a file waits this long first (a cold disk, a slow network GET)."""
        self.write_delay_s = 0.0
        """Every whole-file write waits this long first (a busy disk's fsyncs, a far PUT)."""
        self.before_sync: Callable[[], None] | None = None
        """Called as each sync starts (tests use it to hold a sync while others write)."""
        self._mutex = threading.Lock()

    def take_sync_failure(self) -> bool:
        with self._mutex:
            if self.sync_failures > 0:
                self.sync_failures -= 1
                return True
            return False


class FaultyAppendFile:
    def __init__(self, inner: AppendFile, faults: Faults, name: str) -> None:
        self._inner = inner
        self._faults = faults
        self._name = name

    def append(self, parts: Sequence[bytes | memoryview]) -> None:
        if self._faults.disk_full:
            data = b"".join(parts)
            self._inner.append([data[: len(data) // 2]])
            raise StorageError(f"append to {self._name} failed: ENOSPC (No space left on device)")
        self._inner.append(parts)

    def reserve(self, size: int) -> None:
        if not self._faults.disk_full:
            self._inner.reserve(size)

    def sync(self) -> None:
        if self._faults.before_sync is not None:
            self._faults.before_sync()
        if self._faults.take_sync_failure():
            raise StorageError(f"fsync of {self._name} failed: EIO (Input/output error)")
        self._inner.sync()

    def truncate(self, size: int) -> None:
        self._inner.truncate(size)

    def size(self) -> int:
        return self._inner.size()

    def close(self) -> None:
        self._inner.close()


class FaultyReadFile:
    def __init__(self, inner: ReadFile, faults: Faults) -> None:
        self._inner = inner
        self._faults = faults

    def read(self, position: int, length: int) -> bytes:
        if self._faults.read_delay_s:
            time.sleep(self._faults.read_delay_s)
        return self._inner.read(position, length)

    def size(self) -> int:
        return self._inner.size()

    def keep(self) -> None:
        self._inner.keep()

    def close(self) -> None:
        self._inner.close()


class FaultyPublicFiles:
    """The inner storage's public files; a full disk fails their writes too."""

    def __init__(self, inner: PublicFiles, storage: FaultyStorage) -> None:
        self.inner = inner
        self._storage = storage

    @property
    def epoch(self) -> int | None:
        return self.inner.epoch

    def url(self, name: str) -> str:
        return self.inner.url(name)

    def create(self, name: str, data: bytes) -> None:
        self._storage._check_space(name)
        self.inner.create(name, data)

    def read(self, name: str) -> tuple[bytes, str] | None:
        return self.inner.read(name)

    def replace(self, name: str, data: bytes, version: str | None) -> str:
        self._storage._check_space(name)
        return self.inner.replace(name, data, version)

    def list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)

    def delete(self, names: Sequence[str]) -> None:
        self.inner.delete(names)

    def delete_prefix(self, prefix: str) -> None:
        self.inner.delete_prefix(prefix)


class FaultyStorage:
    """Wraps a storage; every call passes through unless a fault is switched on."""

    def __init__(self, inner: Storage, faults: Faults | None = None) -> None:
        self.inner = inner
        self.faults = faults or Faults()
        self.fenced = inner.fenced
        self.open_threads = inner.open_threads

    def __getattr__(self, name: str) -> object:
        """What the inner storage offers beyond the port (a local disk's `sweep_trash`
        and `folders`, ...), as it is: the broker uses it as on the inner storage."""
        if name in ("inner", "faults"):  # not set yet (while unpickling, copying)
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def write_ahead_log(self) -> bool:
        return bool(getattr(self.inner, "write_ahead_log", False))

    def _check_space(self, name: str) -> None:
        if self.faults.disk_full:
            raise StorageError(f"writing {name} failed: ENOSPC (No space left on device)")

    def lock(self) -> None:
        self.inner.lock()

    def public(self) -> FaultyPublicFiles:
        return FaultyPublicFiles(self.inner.public(), self)

    def attach(self) -> None:
        self.inner.attach()

    def create_appendable(self, name: str, initial: bytes) -> AppendFile:
        self._check_space(name)
        if self.faults.create_failures > 0:
            self.faults.create_failures -= 1
            raise StorageError(f"creating {name} failed: EIO (Input/output error)")
        return FaultyAppendFile(self.inner.create_appendable(name, initial), self.faults, name)

    def open_appendable(self, name: str) -> AppendFile:
        return FaultyAppendFile(self.inner.open_appendable(name), self.faults, name)

    def open_read(self, name: str) -> ReadFile:
        return FaultyReadFile(self.inner.open_read(name), self.faults)

    def read_all(self, name: str) -> bytes | None:
        return self.inner.read_all(name)

    def write_atomic(self, name: str, data: bytes) -> None:
        self._check_space(name)
        if self.faults.write_delay_s:
            time.sleep(self.faults.write_delay_s)
        self.inner.write_atomic(name, data)

    def write_hint(self, name: str, data: bytes) -> None:
        self.inner.write_hint(name, data)

    def list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)

    def delete(self, name: str) -> None:
        self.inner.delete(name)

    def delete_prefix(self, prefix: str) -> None:
        self.inner.delete_prefix(prefix)

    def close(self) -> None:
        self.inner.close()
