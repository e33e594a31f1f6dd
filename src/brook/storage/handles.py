"""Open files are a budget: a cache of descriptors shared by every file of a
local directory (SPEC §11).

A broker with 10,000 topics and 1,000 endpoints' queue groups has far more files
than a process may keep open (systemd's soft limit is 1,024). So a file object
(`LocalReadFile`, `LocalAppendFile`) does not own a descriptor: it borrows one
from `Handles` for each operation (`acquire` ... `release`), and the cache keeps
at most `budget` open, closing the least recently used ones that no operation
holds. A file closed that way is opened again, by its path, at its next use; a
cold topic or an idle endpoint's status log holds no descriptor, as does a file
idle for longer than `idle_ms` (closed by `close_idle`, run at maintenance).

Durability: a file written and not yet synced is never closed by the cache. On
Linux a write-back error is reported to the descriptors open when it happened, so
a file closed dirty and opened again could have its fsync succeed although its
data was lost (fsyncgate); holding the descriptor until the sync is the safe rule.

`EMFILE` never reaches a caller while the cache holds anything it may close: an
open that fails for want of descriptors closes half of the idle ones and tries
again (descriptors held outside the cache, by connections, count against the same
process limit).
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
import time
from collections import OrderedDict

from brook import limits

log = logging.getLogger("brook.storage")

_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


def raise_open_files_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (as Go's runtime
    does at start: the soft limit of 1,024 is for select()-era programs); the soft
    limit in force after. Idempotent; a limit that cannot be raised is left."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = limits.open_files_raise_max
    if soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.info("open files: could not raise the soft limit to %d (%s)", hard, exc)
    return limits.open_files_raise_max if soft == resource.RLIM_INFINITY else soft


def budget_for(soft_limit: int, wanted: int | None) -> int:
    """How many files the cache may keep open: `wanted` (open_files_max) when given,
    else a share of the process's limit (the rest is for connections, the HTTP
    server's and delivery's, and for short-lived files); never more than that share."""
    share = max(limits.open_files_min, int(soft_limit * limits.open_files_share))
    return share if wanted is None else max(limits.open_files_min, min(wanted, share))


class Handle:
    """A file's borrowed descriptor, as the cache keeps it: opened from `path` with
    `flags` whenever needed."""

    __slots__ = ("fd", "flags", "identity", "kept", "path", "pins", "synced", "used_s", "writes")

    def __init__(self, path: str | os.PathLike[str], flags: int) -> None:
        self.path = os.fspath(path)
        """As a str: a Path would be turned into one at every open."""
        self.flags = flags
        self.fd = -1
        self.pins = 0
        """Operations using the descriptor now: it is not closed under them."""
        self.writes = 0
        """Writes made through it (its owner counts them, before each)."""
        self.synced = 0
        """`writes` as of the start of its last successful sync: while they differ it is
        dirty, and kept open until synced (see the module)."""
        self.kept = False
        """Must stay this very file until closed (`Handles.keep`): never closed early."""
        self.identity: tuple[int, int] | None = None
        """(device, inode) of the file first opened: a reopen must find the same file."""
        self.used_s = 0.0

    @property
    def dirty(self) -> bool:
        return self.writes != self.synced


class Handles:
    def __init__(self, budget: int, idle_ms: int = limits.open_files_idle_ms_default) -> None:
        self.budget = budget
        self.idle_s = idle_ms / 1000
        self._mutex = threading.Lock()
        self._open: OrderedDict[Handle, None] = OrderedDict()
        """Handles holding a descriptor, least recently used first."""
        self._over_budget_said = False

    def __len__(self) -> int:
        return len(self._open)

    def acquire(self, handle: Handle) -> int:
        """The handle's descriptor, opened if it has none, pinned until `release`.
        Raises OSError as os.open does (EMFILE only when nothing could be closed)."""
        with self._mutex:
            handle.pins += 1
            handle.used_s = time.monotonic()
            if handle.fd >= 0:
                self._open.move_to_end(handle)
                return handle.fd
            try:
                self._make_room(len(self._open) + 1 - self.budget)
                handle.fd = self._open_file(handle)
            except BaseException:
                handle.pins -= 1
                raise
            self._open[handle] = None
            return handle.fd

    def release(self, handle: Handle) -> None:
        with self._mutex:
            handle.pins -= 1

    def keep(self, handle: Handle) -> None:
        """Keep the handle's descriptor open until `forget`, whatever the budget: its
        owner reads this very file even once another is stored under its name (a
        segment rewritten by compaction, read on by the reads under way)."""
        self.acquire(handle)
        with self._mutex:
            handle.kept = True
            handle.pins -= 1

    def forget(self, handle: Handle) -> None:
        """The file is closed for good: its descriptor too, now (pins or not)."""
        with self._mutex:
            if handle.fd >= 0:
                self._open.pop(handle, None)
                os.close(handle.fd)
                handle.fd = -1

    def close_idle(self) -> int:
        """Close the descriptors no operation has used for `idle_ms`; how many."""
        deadline = time.monotonic() - self.idle_s
        with self._mutex:
            idle = []
            for handle in self._open:
                if handle.used_s > deadline:
                    break  # least recently used first: the rest are newer
                if self._evictable(handle):
                    idle.append(handle)
            for handle in idle:
                self._close(handle)
            closed = len(idle)
        return closed

    # ------------------------------------------------------------ inside (mutex held)

    def _open_file(self, handle: Handle) -> int:
        try:
            fd = os.open(handle.path, handle.flags)
        except OSError as exc:
            if exc.errno not in _OUT_OF_DESCRIPTORS or not self._make_room(len(self._open) // 2):
                raise
            log.warning(
                "open files: the process ran out of descriptors (%s); closed idle files, trying "
                "again. Raise the limit (ulimit -n) or lower open_files_max",
                errno.errorcode[exc.errno or 0],
            )
            fd = os.open(handle.path, handle.flags)
        stat = os.fstat(fd)
        identity = (stat.st_dev, stat.st_ino)
        if handle.identity is None:
            handle.identity = identity
        elif handle.identity != identity:
            # Another file was stored under the name since (a rewrite not kept open):
            # reading or writing it in place of the first would be wrong.
            os.close(fd)
            raise OSError(errno.ESTALE, "the file was replaced since it was opened")
        return fd

    def _make_room(self, count: int) -> int:
        """Close up to `count` least recently used descriptors that may be closed;
        how many were."""
        if count <= 0:
            return 0
        victims = []
        skipped = []
        for handle in self._open:  # least recently used first; those in use are skipped
            if self._evictable(handle):
                victims.append(handle)
                if len(victims) >= count:
                    break
            else:
                skipped.append(handle)
        for handle in victims:
            self._close(handle)
        # Held or not yet synced (segments wait for a checkpoint): not looked at again by
        # every later open, which would make each of them cost as many as are waiting.
        for handle in skipped:
            self._open.move_to_end(handle)
        closed = len(victims)
        if closed < count and not self._over_budget_said:
            self._over_budget_said = True
            log.warning(
                "open files: %d are in use at once, over the budget of %d (open_files_max)",
                len(self._open) + 1,
                self.budget,
            )
        return closed

    @staticmethod
    def _evictable(handle: Handle) -> bool:
        return handle.pins == 0 and not handle.kept and handle.writes == handle.synced

    def _close(self, handle: Handle) -> None:
        del self._open[handle]
        os.close(handle.fd)
        handle.fd = -1
