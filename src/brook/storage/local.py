"""Local-directory storage: the embedded default.

New files and renames are made durable by fsyncing the file and then its
directory; a failed fsync is never retried-and-trusted (the kernel may already
have dropped the dirty pages), it is reported as StorageError.

The directory holds every record and the delivery endpoints' signing secrets,
so what Brook creates in it is its owner's alone: folders 0700, files 0600
(as PostgreSQL keeps its data directory).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import fcntl
import itertools
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from brook import layout, limits
from brook.errors import Locked, StorageError
from brook.storage import check_name
from brook.storage.handles import Handle, Handles, budget_for, raise_open_files_limit
from brook.storage.plain import PortFiles

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


class _Borrowed:
    """A file that borrows its descriptor from the storage's cache for each
    operation (handles.py): it holds none while idle."""

    def __init__(self, handles: Handles, path: str | Path, name: str, flags: int) -> None:
        self._handles = handles
        self._handle = Handle(path, flags)
        self._name = name
        fd = handles.acquire(self._handle)  # opened now: a missing file fails here
        try:
            self._opened_size = os.fstat(fd).st_size
        finally:
            handles.release(self._handle)

    @contextlib.contextmanager
    def _fd(self, action: str) -> Iterator[int]:
        """The descriptor for one operation; an OSError (opening or in it) is a
        StorageError saying `action`."""
        try:
            fd = self._handles.acquire(self._handle)
        except OSError as exc:
            raise _fail(f"{action} (reopening)", self._name, exc) from None
        try:
            yield fd
        except OSError as exc:
            raise _fail(action, self._name, exc) from None
        finally:
            self._handles.release(self._handle)


class LocalReadFile(_Borrowed):
    def __init__(self, handles: Handles, path: str | Path, name: str) -> None:
        super().__init__(handles, path, name, os.O_RDONLY)

    def read(self, position: int, length: int) -> bytes:
        with self._fd("reading") as fd:
            return os.pread(fd, length, position)

    def size(self) -> int:
        with self._fd("reading") as fd:
            return os.fstat(fd).st_size

    def keep(self) -> None:
        self._handles.keep(self._handle)

    def close(self) -> None:
        self._handles.forget(self._handle)


class LocalAppendFile(_Borrowed):
    """An appendable file whose space may be preallocated ahead of the data.

    The file on disk may be longer than the data (a zero-filled, fallocated
    tail); `size()` is the end of the data. The tail is cut on `truncate` and
    `close`, and recovery treats a zero tail as free space, not damage.
    """

    def __init__(
        self, handles: Handles, path: str | Path, name: str, preallocate_bytes: int
    ) -> None:
        super().__init__(handles, path, name, os.O_WRONLY)
        self._preallocate = preallocate_bytes
        self._size = self._opened_size
        self._allocated = self._size
        self._closed = False

    def reserve(self, size: int) -> None:
        if self._preallocate <= 0 or self._size + size <= self._allocated:
            return
        # Steps grow with the file (64 KiB at first, up to preallocate_bytes), so
        # quiet partitions reserve little and busy ones rarely allocate.
        step = min(self._preallocate, max(64 * 1024, self._size))
        step = max(step, self._size + size - self._allocated)
        try:
            with self._fd("reserving space in") as fd:
                os.posix_fallocate(fd, self._allocated, step)
        except StorageError:
            # Preallocation is only an optimisation: a full disk shows up on the write.
            return
        self._allocated += step

    def append(self, parts: Sequence[bytes | memoryview]) -> None:
        want = sum(map(len, parts))
        handle = self._handle
        with self._fd("append to") as fd:
            handle.writes += 1  # before the write: never closed with it unsynced
            at = self._size
            for start in range(0, len(parts), _IOV_MAX):  # pwritev takes at most IOV_MAX parts
                group = parts[start : start + _IOV_MAX]
                size = sum(map(len, group))
                done = os.pwritev(fd, group, at)
                if done < size:
                    # A short write: finish the remainder, which raises if the disk is full.
                    whole = memoryview(b"".join(group))
                    while done < size:
                        done += os.pwrite(fd, whole[done:], at + done)
                at += size
        self._size += want
        self._allocated = max(self._allocated, self._size)

    def sync(self) -> None:
        handle = self._handle
        with self._fd("fsync of") as fd:
            writes = handle.writes
            os.fdatasync(fd)
            handle.synced = max(handle.synced, writes)

    def truncate(self, size: int) -> None:
        handle = self._handle
        with self._fd("truncate of") as fd:
            writes = handle.writes
            os.ftruncate(fd, size)
            os.fsync(fd)
            handle.synced = max(handle.synced, writes)
        self._size = self._allocated = size

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._allocated > self._size:
                self.truncate(self._size)
        except StorageError as exc:
            # Harmless: the reserved zero tail stays, and recovery treats it as free space.
            log.warning("%s: could not trim reserved space on close: %s", self._name, exc.message)
        finally:
            self._handles.forget(self._handle)


class LocalStorage:
    """Files under one root directory."""

    write_ahead_log = True
    """Rounds are made durable in one WAL file (log/wal.py): one fdatasync each."""
    open_threads = 1
    """Opening is the interpreter's work here: threads would only contend for it."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        preallocate_bytes: int = limits.preallocate_bytes_default,
        open_files_max: int | None = None,
    ) -> None:
        """`open_files_max`: most files kept open at once (handles.budget_for: by
        default a share of the process's limit, which is raised to its hard limit)."""
        self.root = Path(root).absolute()
        self.fenced = threading.Event()
        """Never set: a directory is locked (flock), not taken over."""
        self.preallocate_bytes = preallocate_bytes
        self.handles = Handles(budget_for(raise_open_files_limit(), open_files_max))
        self._root_prefix = str(self.root) + os.sep
        self._lock_fd = -1
        self._scratch_ids = itertools.count()
        try:
            make_dirs_durable(None, self.root)
        except OSError as exc:
            raise _fail("creating", str(self.root), exc) from None

    def _path(self, name: str) -> Path:
        return self.root / check_name(name)

    def _file(self, name: str) -> str:
        """The file's path as a plain string: a start opens thousands of files, and
        joining pathlib paths cost more there than the reads themselves."""
        return self._root_prefix + check_name(name)

    def lock(self) -> None:
        path = self.root / layout.LOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            error = _fail("locking", str(path), exc)
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise error from None
            raise StorageError(
                f"{error.message}: a broker that writes needs a writable data directory"
                " (commands that only read, such as `brook topics list`, work on a read-only one)"
            ) from None
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

    def public(self) -> PortFiles:
        """The lake's files: plain files under the directory already."""
        return PortFiles(self, str(self.root))

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
            return LocalAppendFile(self.handles, path, name, self.preallocate_bytes)
        except OSError as exc:
            raise _fail("creating", name, exc) from None

    def open_appendable(self, name: str) -> LocalAppendFile:
        try:
            return LocalAppendFile(self.handles, self._file(name), name, self.preallocate_bytes)
        except OSError as exc:
            raise _fail("opening", name, exc) from None

    def open_read(self, name: str) -> LocalReadFile:
        try:
            return LocalReadFile(self.handles, self._file(name), name)
        except OSError as exc:
            raise _fail("opening", name, exc) from None

    def read_all(self, name: str) -> bytes | None:
        try:
            # os.open and os.read, not Path.read_bytes: a start reads two small files
            # per partition, and the io stack is most of the cost of each.
            fd = os.open(self._file(name), os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                parts = [os.read(fd, max(size, 1))]
                while parts[-1]:
                    parts.append(os.read(fd, 1 << 16))
            finally:
                os.close(fd)
            return b"".join(parts)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _fail("reading", name, exc) from None

    def _scratch_name(self, what: str) -> Path:
        """A new name in the scratch folder (created if missing), which every start
        empties: temporaries left there by a crash are found without a walk of the
        whole tree (100,000 topics: seconds at every start)."""
        make_dirs_durable(self.root, self.root / layout.SCRATCH)
        return self.root / layout.SCRATCH / f"{os.getpid()}-{next(self._scratch_ids)}.{what}"

    def write_atomic(self, name: str, data: bytes) -> None:
        path = self._path(name)
        temp = self._scratch_name("tmp")
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
        # Opened and closed each time, by a plain string path: a descriptor kept per hint
        # would double what 10,000 partitions ask of the file budget.
        try:
            fd = os.open(self._root_prefix + check_name(name), os.O_WRONLY | os.O_CREAT, FILE_MODE)
            try:
                os.pwrite(fd, data, 0)
            finally:
                os.close(fd)
        except OSError as exc:
            log.debug("hint %s not written: %s", name, exc)

    def list(self, prefix: str) -> list[str]:
        # os.scandir and plain strings: a start lists every partition's folder, and
        # os.walk with pathlib cost more than the listing itself.
        root = str(self.root)
        folders = [str(self._path(prefix.rstrip("/"))) if prefix else root]
        names = []
        while folders:
            folder = folders.pop()
            try:
                entries = os.scandir(folder)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise _fail("listing", prefix, exc) from None
            with entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    if entry.is_dir():
                        if not entry.is_symlink():
                            folders.append(entry.path)
                    elif not (folder == root and entry.name == layout.LOCK):
                        names.append(entry.path[len(root) + 1 :])
        return sorted(names)

    def folders(self, prefix: str) -> builtins.list[str]:
        """The names of the folders right under `prefix` (a start lists the topics'
        folders, not every file of every topic); hidden ones (trash) left out."""
        base = self._path(prefix.rstrip("/"))
        try:
            with os.scandir(base) as entries:
                return sorted(e.name for e in entries if e.is_dir() and not e.name.startswith("."))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise _fail("listing", prefix, exc) from None

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
        try:
            trash = self._scratch_name("trash")
            try:
                os.rename(base, trash)
            except FileNotFoundError:
                return  # a deletion of a folder holding it went first: gone either way
            with contextlib.suppress(FileNotFoundError):  # (its folder went the same way)
                fsync_dir(base.parent)
            _remove_tree(trash)
        except OSError as exc:
            raise _fail("deleting", prefix, exc) from None

    def sweep_trash(self) -> None:
        """Finish deletions, and drop temporary files, that a crash interrupted (the
        owner, at start). An older Brook left them beside what they belonged to: a
        directory that has no scratch folder yet is walked once for those."""
        scratch = self.root / layout.SCRATCH
        try:
            if not scratch.is_dir():
                self._sweep_everywhere()
                make_dirs_durable(self.root, scratch)
            with os.scandir(scratch) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        _remove_tree(Path(entry.path))
                    else:
                        os.unlink(entry.path)
        except OSError as exc:
            raise _fail("sweeping", layout.SCRATCH, exc) from None

    def _sweep_everywhere(self) -> None:
        for folder, dirs, files in os.walk(self.root):
            for d in list(dirs):
                if d.startswith(".trash-"):
                    _remove_tree(Path(folder, d))
                    dirs.remove(d)
            for file in files:
                if file.startswith(".") and file.endswith(".tmp"):
                    os.unlink(os.path.join(folder, file))

    def close_idle(self) -> int:
        """Close the files no one used for a while (handles.Handles.close_idle)."""
        return self.handles.close_idle()

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
