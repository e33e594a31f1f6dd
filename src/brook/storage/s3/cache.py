"""A read-through disk cache of immutable objects, bounded in bytes, least recently used out.

Objects in the bucket never change once written (their keys name the writer's
epoch and a counter), so a cached copy never needs invalidating; `forget` is
for the one exception, a chunk rewritten while repairing a damaged tail.
Each file starts with the CRC32C of its contents: a copy torn by a crash is
dropped and fetched again, never served.
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from collections import OrderedDict
from pathlib import Path

import crc32c

_CHECK = struct.Struct("<I")


class ObjectCache:
    def __init__(self, folder: Path, bytes_max: int) -> None:
        self.folder = folder
        self.bytes_max = bytes_max
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._sizes: OrderedDict[str, int] = OrderedDict()
        """File name -> bytes on disk, least recently used first."""
        self._bytes = 0
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        for entry in sorted(os.scandir(folder), key=lambda e: e.stat().st_mtime):
            if entry.name.endswith(".tmp"):
                os.unlink(entry.path)
            else:
                self._sizes[entry.name] = entry.stat().st_size
                self._bytes += entry.stat().st_size
        self._evict()

    @staticmethod
    def _file(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    def get(self, key: str) -> bytes | None:
        name = self._file(key)
        with self._lock:
            if name not in self._sizes:
                self.misses += 1
                return None
            self._sizes.move_to_end(name)
        try:
            raw = (self.folder / name).read_bytes()
        except OSError:
            raw = b""
        data = raw[_CHECK.size :]
        if len(raw) < _CHECK.size or _CHECK.unpack_from(raw)[0] != crc32c.crc32c(data):
            self.forget(key)
            with self._lock:
                self.misses += 1
            return None
        with self._lock:
            self.hits += 1
        return data

    def put(self, key: str, data: bytes) -> None:
        """Keep a copy; objects larger than the whole cache are not kept."""
        size = _CHECK.size + len(data)
        if size > self.bytes_max:
            return
        name = self._file(key)
        temp = self.folder / f"{name}.{threading.get_ident()}.tmp"
        try:
            with open(temp, "wb") as out:
                out.write(_CHECK.pack(crc32c.crc32c(data)))
                out.write(data)
            os.replace(temp, self.folder / name)
        except OSError:
            temp.unlink(missing_ok=True)
            return  # a cache that cannot write only costs a fetch
        with self._lock:
            self._bytes += size - self._sizes.pop(name, 0)
            self._sizes[name] = size
        self._evict()

    def forget(self, key: str) -> None:
        name = self._file(key)
        with self._lock:
            self._bytes -= self._sizes.pop(name, 0)
        (self.folder / name).unlink(missing_ok=True)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def _evict(self) -> None:
        while True:
            with self._lock:
                if self._bytes <= self.bytes_max or not self._sizes:
                    return
                name, size = self._sizes.popitem(last=False)
                self._bytes -= size
            (self.folder / name).unlink(missing_ok=True)
