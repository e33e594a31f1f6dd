"""In-memory storage for tests and experiments: `brook.open("memory://")`.

It keeps, for every file, what has been written and how much of it was synced,
so `crash()` can model a power loss the way SQLite's crash-test VFS does: every
byte that was not synced is gone.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from brook.errors import StorageError
from brook.storage import check_name
from brook.storage.plain import PortFiles


class _File:
    __slots__ = ("data", "durable")

    def __init__(self, data: bytes, durable: int) -> None:
        self.data = bytearray(data)
        self.durable = durable


class MemoryReadFile:
    def __init__(self, file: _File) -> None:
        self._file = file

    def read(self, position: int, length: int) -> bytes:
        return bytes(self._file.data[position : position + length])

    def size(self) -> int:
        return len(self._file.data)

    def keep(self) -> None:
        """Nothing to do: it reads the file object it was given, whatever its name holds."""

    def close(self) -> None:
        pass


class MemoryAppendFile:
    def __init__(self, file: _File) -> None:
        self._file = file

    def append(self, parts: Sequence[bytes | memoryview]) -> None:
        for part in parts:
            self._file.data += part

    def reserve(self, size: int) -> None:
        pass

    def sync(self) -> None:
        self._file.durable = len(self._file.data)

    def truncate(self, size: int) -> None:
        del self._file.data[size:]
        self._file.durable = min(self._file.durable, size)

    def size(self) -> int:
        return len(self._file.data)

    def close(self) -> None:
        pass


class MemoryStorage:
    """Files in a dict; durable means 'synced', which `crash()` honours."""

    write_ahead_log = True
    """As a directory: rounds made durable in the WAL, segments by checkpoints."""
    open_threads = 1

    def __init__(self) -> None:
        self.fenced = threading.Event()
        """Never set: every memory:// broker has a storage of its own."""
        self._files: dict[str, _File] = {}
        self._mutex = threading.Lock()

    def lock(self) -> None:
        # Every memory:// broker has a storage of its own, so there is nobody to exclude.
        pass

    def public(self) -> PortFiles:
        return PortFiles(self, "memory://")

    def attach(self) -> None:
        """Nothing to do: nobody else can own this storage."""

    def create_appendable(self, name: str, initial: bytes) -> MemoryAppendFile:
        with self._mutex:
            file = self._files[check_name(name)] = _File(initial, len(initial))
        return MemoryAppendFile(file)

    def _get(self, name: str) -> _File:
        try:
            return self._files[name]
        except KeyError:
            raise StorageError(f"opening {name} failed: no such file") from None

    def open_appendable(self, name: str) -> MemoryAppendFile:
        return MemoryAppendFile(self._get(name))

    def open_read(self, name: str) -> MemoryReadFile:
        return MemoryReadFile(self._get(name))

    def read_all(self, name: str) -> bytes | None:
        file = self._files.get(name)
        return None if file is None else bytes(file.data)

    def write_atomic(self, name: str, data: bytes) -> None:
        with self._mutex:
            self._files[check_name(name)] = _File(data, len(data))

    def write_hint(self, name: str, data: bytes) -> None:
        with self._mutex:
            self._files[check_name(name)] = _File(data, 0)  # not durable: a crash drops it

    def list(self, prefix: str) -> list[str]:
        with self._mutex:
            return sorted(n for n in self._files if n.startswith(prefix))

    def delete(self, name: str) -> None:
        with self._mutex:
            self._files.pop(name, None)

    def delete_prefix(self, prefix: str) -> None:
        with self._mutex:
            for name in [n for n in self._files if n.startswith(prefix)]:
                del self._files[name]

    def close(self) -> None:
        pass

    def crash(self) -> MemoryStorage:
        """A copy holding only what was durable: the state after a power loss."""
        survivor = MemoryStorage()
        with self._mutex:
            for name, file in self._files.items():
                survivor._files[name] = _File(bytes(file.data[: file.durable]), file.durable)
        return survivor
