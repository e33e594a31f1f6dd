"""Local-directory storage: the embedded default.

New files and renames are made durable by fsyncing the file and then its
directory; a failed fsync is never retried-and-trusted (the kernel may already
have dropped the dirty pages), it is reported as StorageError.

The directory holds every record and the delivery endpoints' signing secrets,
so what Brook creates in it is its owner's alone: folders 0700, files 0600
(as PostgreSQL keeps its data directory).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from brook import layout, limits
from brook.errors import Locked, StorageError
from brook.storage import check_name

_IOV_MAX = os.sysconf("SC_IOV_MAX")
FILE_MODE = 0o600
FOLDER_MODE = 0o700

log = logging.getLogger("brook.storage")


def _fail(action: str, name: str, exc: OSError) -> StorageError:
    reason = errno.errorcode.get(exc.errno or 0, "error")
    return StorageError(f"{action} {name} failed: {reason} ({exc.strerror})")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs_durable(root: Path | None, folder: Path) -> None:
    """Create `folder` and any missing parents below `root` (all the way up without
    one), each made durable: a new directory's entry is only on disk once its
    parent is synced, and a power cut takes back what is not."""
    missing = []
    current = folder
    while current != root and not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=FOLDER_MODE)
        except FileExistsError:
            continue
        fsync_dir(path.parent)


class LocalReadFile:
    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY)

    def read(self, position: int, length: int) -> bytes:
        return os.pread(self._fd, length, position)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class LocalAppendFile:
    """An appendable file whose space may be preallocated ahead of the data.

    The file on disk may be longer than the data (a zero-filled, fallocated
    tail); `size()` is the end of the data. The tail is cut on `truncate` and
    `close`, and recovery treats a zero tail as free space, not damage.
    """

    def __init__(self, path: Path, name: str, preallocate_bytes: int) -> None:
        self._name = name
        self._preallocate = preallocate_bytes
        self._fd = os.open(path, os.O_WRONLY)
        self._size = os.fstat(self._fd).st_size
        self._allocated = self._size

    def reserve(self, size: int) -> None:
        if self._preallocate <= 0 or self._size + size <= self._allocated:
            return
        # Steps grow with the file (64 KiB at first, up to preallocate_bytes), so
        # quiet partitions reserve little and busy ones rarely allocate.
        step = min(self._preallocate, max(64 * 1024, self._size))
        step = max(step, self._size + size - self._allocated)
        try:
            os.posix_fallocate(self._fd, self._allocated, step)
        except OSError:
            # Preallocation is only an optimisation: a full disk shows up on the write.
            return
        self._allocated += step

    def append(self, parts: Sequence[bytes | memoryview]) -> None:
        want = sum(map(len, parts))
        try:
            at = self._size
            for start in range(0, len(parts), _IOV_MAX):  # pwritev takes at most IOV_MAX parts
                group = parts[start : start + _IOV_MAX]
                size = sum(map(len, group))
                done = os.pwritev(self._fd, group, at)
                if done < size:
                    # A short write: finish the remainder, which raises if the disk is full.
                    whole = memoryview(b"".join(group))
                    while done < size:
                        done += os.pwrite(self._fd, whole[done:], at + done)
                at += size
        except OSError as exc:
            raise _fail("append to", self._name, exc) from None
        self._size += want
        self._allocated = max(self._allocated, self._size)

    def sync(self) -> None:
        try:
            os.fdatasync(self._fd)
        except OSError as exc:
            raise _fail("fsync of", self._name, exc) from None

    def truncate(self, size: int) -> None:
        try:
            os.ftruncate(self._fd, size)
            os.fsync(self._fd)
        except OSError as exc:
            raise _fail("truncate of", self._name, exc) from None
        self._size = self._allocated = size

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            if self._allocated > self._size:
                self.truncate(self._size)
        except StorageError as exc:
            # Harmless: the reserved zero tail stays, and recovery treats it as free space.
            log.warning("%s: could not trim reserved space on close: %s", self._name, exc.message)
        finally:
            os.close(self._fd)
            self._fd = -1


class LocalStorage:
    """Files under one root directory."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        preallocate_bytes: int = limits.preallocate_bytes_default,
    ) -> None:
        self.root = Path(root).absolute()
        self.preallocate_bytes = preallocate_bytes
        self._lock_fd = -1
        try:
            make_dirs_durable(None, self.root)
        except OSError as exc:
            raise _fail("creating", str(self.root), exc) from None

    def _path(self, name: str) -> Path:
        return self.root / check_name(name)

    def lock(self) -> None:
        fd = os.open(self.root / layout.LOCK, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Locked(
                f"{self.root} is in use by another broker (lock held on {layout.LOCK})"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def attach(self) -> None:
        """Nothing to take: an outside reader leaves the lock to the owner, and reads
        the active segment only up to its durable mark (docs/GUARANTEES.md)."""

    def create_appendable(self, name: str, initial: bytes) -> LocalAppendFile:
        path = self._path(name)
        try:
            make_dirs_durable(self.root, path.parent)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            try:
                os.write(fd, initial)
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(path.parent)
            return LocalAppendFile(path, name, self.preallocate_bytes)
        except OSError as exc:
            raise _fail("creating", name, exc) from None

    def open_appendable(self, name: str) -> LocalAppendFile:
        try:
            return LocalAppendFile(self._path(name), name, self.preallocate_bytes)
        except OSError as exc:
            raise _fail("opening", name, exc) from None

    def open_read(self, name: str) -> LocalReadFile:
        try:
            return LocalReadFile(self._path(name))
        except OSError as exc:
            raise _fail("opening", name, exc) from None

    def read_all(self, name: str) -> bytes | None:
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _fail("reading", name, exc) from None

    def write_atomic(self, name: str, data: bytes) -> None:
        path = self._path(name)
        temp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        try:
            make_dirs_durable(self.root, path.parent)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temp, path)
            fsync_dir(path.parent)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise _fail("writing", name, exc) from None

    def write_hint(self, name: str, data: bytes) -> None:
        # Written in place: a reader may catch it half-written, which its checksum shows.
        try:
            fd = os.open(self._path(name), os.O_WRONLY | os.O_CREAT, FILE_MODE)
            try:
                os.pwrite(fd, data, 0)
            finally:
                os.close(fd)
        except OSError as exc:
            log.debug("hint %s not written: %s", name, exc)

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix.rstrip("/")) if prefix else self.root
        if not base.is_dir():
            return []
        names = []
        for folder, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for file in files:
                if file.startswith(".") or (folder == str(self.root) and file == layout.LOCK):
                    continue
                names.append(Path(folder, file).relative_to(self.root).as_posix())
        return sorted(names)

    def delete(self, name: str) -> None:
        path = self._path(name)
        try:
            path.unlink(missing_ok=True)
            if path.parent.exists():
                fsync_dir(path.parent)
        except OSError as exc:
            raise _fail("deleting", name, exc) from None

    def delete_prefix(self, prefix: str) -> None:
        base = self._path(prefix.rstrip("/"))
        if not base.exists():
            return
        # Rename first so a crash mid-removal leaves no half-deleted folder behind
        # under the live name; leftovers are swept by `sweep_trash`.
        trash = base.with_name(f".trash-{base.name}-{os.getpid()}-{id(self)}")
        try:
            os.rename(base, trash)
            fsync_dir(base.parent)
            _remove_tree(trash)
        except OSError as exc:
            raise _fail("deleting", prefix, exc) from None

    def sweep_trash(self) -> None:
        """Finish deletions, and drop temporary files, that a crash interrupted."""
        for folder, dirs, files in os.walk(self.root):
            for d in list(dirs):
                if d.startswith(".trash-"):
                    _remove_tree(Path(folder, d))
                    dirs.remove(d)
            for file in files:
                if file.startswith(".") and file.endswith(".tmp"):
                    os.unlink(os.path.join(folder, file))

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


def _remove_tree(path: Path) -> None:
    for folder, dirs, files in os.walk(path, topdown=False):
        for file in files:
            os.unlink(os.path.join(folder, file))
        for d in dirs:
            os.rmdir(os.path.join(folder, d))
    os.rmdir(path)
