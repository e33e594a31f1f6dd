"""Public files kept through the storage port itself, where its files are already
plain files (a directory) or no one outside can see them anyway (memory).

One writer is sure by the location's lock, so versions are not compared: a
replace always lands, and no epoch is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

from brook.storage import Storage


class PortFiles:
    epoch: int | None = None

    def __init__(self, storage: Storage, root: str) -> None:
        self._storage = storage
        self._root = root.rstrip("/")

    def url(self, name: str) -> str:
        return f"{self._root}/{name}"

    def create(self, name: str, data: bytes) -> None:
        self._storage.write_atomic(name, data)

    def read(self, name: str) -> tuple[bytes, str] | None:
        data = self._storage.read_all(name)
        return None if data is None else (data, "")

    def replace(self, name: str, data: bytes, version: str | None) -> str:
        self._storage.write_atomic(name, data)
        return ""

    def list(self, prefix: str) -> list[str]:
        return self._storage.list(prefix)

    def delete(self, names: Sequence[str]) -> None:
        for name in names:
            self._storage.delete(name)

    def delete_prefix(self, prefix: str) -> None:
        self._storage.delete_prefix(prefix)
