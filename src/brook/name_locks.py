"""A lock per name, made when first wanted and dropped when no one holds or waits
for it: work on one name takes turns while other names go side by side (a topic's
creation and deletion, say, while thousands of other topics are made)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class NameLocks:
    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}
        """name -> (its lock, how many threads hold it or wait for it)."""

    @contextlib.contextmanager
    def hold(self, name: str) -> Iterator[None]:
        """Hold `name`'s lock for the block (not reentrant)."""
        with self._mutex:
            lock, users = self._locks.get(name) or (threading.Lock(), 0)
            self._locks[name] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._mutex:
                users = self._locks[name][1] - 1
                if users:
                    self._locks[name] = (lock, users)
                else:
                    del self._locks[name]

    def __len__(self) -> int:
        """Names held or waited for now."""
        with self._mutex:
            return len(self._locks)
