"""A FUSE file system that forgets what was not fsynced when "the power goes" (tests only).

`kill -9` of a broker keeps the kernel's page cache: every write it made survives,
synced or not. A power cut does not. This file system, in the spirit of LazyFS,
holds every write in its own memory and makes it durable only where POSIX says a
sync does, so that cutting its power shows what a real power cut would:

- a file's contents and size become durable when the file is fsynced (fsync or
  fdatasync, through any descriptor);
- a directory's entries (names of files and folders) become durable when the
  directory itself is fsynced: a new file, a rename or an unlink is undone by a
  cut unless its directory was synced after it;
- nothing else is durable. A name whose entry is durable but whose file's data
  never was comes back as an empty file.

This is stricter than ext4 (whose journal commits metadata in order), as the
guarantee Brook gives must hold on any POSIX file system.

Durable state lives in BACKING: `data/<inode>` holds a file's synced bytes and
`dirs/<inode>.json` a directory's synced entries; the live state lives only in
this process. A cut is a line on stdin:

- `cut drop`: every write not synced is lost (the classic power cut);
- `cut torn SEED`: as a disk that wrote back some of the page cache before the
  power went: of every file's unsynced 4 KiB pages a random half survive, its
  size is the old or the new one, and a random half of the directories with
  unsynced entries keep them. Torn, out-of-order tails are what recovery meets
  after a real cut.

A failing disk is a line too: `fail fsync N` makes the next N fsyncs fail with
EIO, and, as Linux does after a writeback error, each failed fsync drops the
file's unsynced pages (its contents go back to what was last synced). A caller
that retries the fsync and trusts the second answer has lost data; the broker
must fail the batch instead. `fail` answers `FAILING`.

The mount uses direct I/O, so every read reaches this process: the kernel's page
cache never shows data the file system no longer holds.

After a cut the process writes `CUT` and exits at once; the caller unmounts the
mount point (`umount -l`) and mounts BACKING again with a new process, which
serves what survived. Run as

    python -m tests.powerloss.lazyfs BACKING MOUNTPOINT

It prints READY once mounted. The broker using the mount must be dead before a
cut (a cut with a live writer is not a power cut, it is a bug in the test).
"""

from __future__ import annotations

import errno
import json
import os
import random
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

import mfusepy

PAGE = 4096


class Node:
    """An inode: a file (bytes) or a directory (entries), live and durable."""

    __slots__ = ("data", "durable_data", "durable_entries", "entries", "ino", "mode", "mtime")

    def __init__(self, ino: int, mode: int) -> None:
        self.ino = ino
        self.mode = mode
        self.mtime = time.time()
        self.data = bytearray()
        self.durable_data = b""
        self.entries: dict[str, Node] = {}
        self.durable_entries: dict[str, tuple[int, int]] = {}
        """name -> (inode, mode) as last synced."""

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


class Durable:
    """The synced image in BACKING; every write to it is atomic (write, rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "data").mkdir(parents=True, exist_ok=True)
        (root / "dirs").mkdir(exist_ok=True)

    def _replace(self, path: Path, content: bytes) -> None:
        temp = path.with_name(path.name + ".tmp")
        temp.write_bytes(content)
        os.replace(temp, path)

    def save_data(self, node: Node) -> None:
        self._replace(self.root / "data" / str(node.ino), node.durable_data)

    def save_entries(self, node: Node) -> None:
        text = json.dumps({name: list(v) for name, v in node.durable_entries.items()})
        self._replace(self.root / "dirs" / f"{node.ino}.json", text.encode())

    def load(self) -> tuple[Node, int]:
        """The tree that survived, from the root (inode 1); and the next free inode."""
        top = 1

        def node_for(ino: int, mode: int) -> Node:
            nonlocal top
            top = max(top, ino)
            node = Node(ino, mode)
            if node.is_dir:
                path = self.root / "dirs" / f"{ino}.json"
                saved = json.loads(path.read_text()) if path.exists() else {}
                node.durable_entries = {name: (v[0], v[1]) for name, v in saved.items()}
                node.entries = {
                    name: node_for(i, m) for name, (i, m) in node.durable_entries.items()
                }
            else:
                path = self.root / "data" / str(ino)
                node.durable_data = path.read_bytes() if path.exists() else b""
                node.data = bytearray(node.durable_data)
            return node

        root = node_for(1, stat.S_IFDIR | 0o755)
        for path in (self.root / "data").iterdir():  # inodes past the synced tree, too
            if path.name.isdigit():
                top = max(top, int(path.name))
        return root, top + 1


class LazyFS(mfusepy.Operations):
    use_ns = True

    def __init__(self, backing: Path) -> None:
        self.durable = Durable(backing)
        self.root, self._next_ino = self.durable.load()
        self._mutex = threading.Lock()
        self._handles: dict[int, Node] = {}
        self._next_fh = 1
        self.failing_fsyncs = 0

    def init(self, path: str) -> None:
        """Mounted: tell the process that started us."""
        sys.stdout.write("READY\n")
        sys.stdout.flush()

    # ------------------------------------------------------------ lookup

    def _node(self, path: str) -> Node:
        node = self.root
        for part in path.strip("/").split("/"):
            if not part:
                continue
            if not node.is_dir or part not in node.entries:
                raise mfusepy.FuseOSError(errno.ENOENT)
            node = node.entries[part]
        return node

    def _parent(self, path: str) -> tuple[Node, str]:
        folder, _, name = path.rstrip("/").rpartition("/")
        parent = self._node(folder or "/")
        if not parent.is_dir:
            raise mfusepy.FuseOSError(errno.ENOTDIR)
        return parent, name

    def _new(self, mode: int) -> Node:
        node = Node(self._next_ino, mode)
        self._next_ino += 1
        return node

    def _open_handle(self, node: Node) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = node
        return fh

    def _file(self, path: str, fh: int | None) -> Node:
        node = self._handles.get(fh) if fh else None
        return node if node is not None else self._node(path)

    # ------------------------------------------------------------ metadata

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        with self._mutex:
            node = self._file(path, fh)
            ns = int(node.mtime * 1e9)
            return {
                "st_mode": node.mode,
                "st_ino": node.ino,
                "st_nlink": 2 if node.is_dir else 1,
                "st_size": 0 if node.is_dir else len(node.data),
                "st_blocks": (len(node.data) + 511) // 512,
                "st_atime": ns,
                "st_mtime": ns,
                "st_ctime": ns,
                "st_uid": os.getuid(),
                "st_gid": os.getgid(),
            }

    def readdir(self, path: str, fh: int) -> list[str]:
        with self._mutex:
            return [".", "..", *self._node(path).entries]

    def statfs(self, path: str) -> dict[str, int]:
        return {
            "f_bsize": PAGE,
            "f_frsize": PAGE,
            "f_blocks": 1 << 24,
            "f_bfree": 1 << 23,
            "f_bavail": 1 << 23,
            "f_files": 1 << 20,
            "f_ffree": 1 << 19,
            "f_namemax": 255,
        }

    def chmod(self, path: str, mode: int) -> int:
        with self._mutex:
            node = self._node(path)
            node.mode = stat.S_IFMT(node.mode) | stat.S_IMODE(mode)
            return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        with self._mutex:
            self._node(path).mtime = (times[1] / 1e9) if times else time.time()
            return 0

    # ------------------------------------------------------------ namespace

    def mkdir(self, path: str, mode: int) -> int:
        with self._mutex:
            parent, name = self._parent(path)
            if name in parent.entries:
                raise mfusepy.FuseOSError(errno.EEXIST)
            parent.entries[name] = self._new(stat.S_IFDIR | stat.S_IMODE(mode))
            return 0

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        with self._mutex:
            parent, name = self._parent(path)
            node = parent.entries.get(name)
            if node is None:
                node = parent.entries[name] = self._new(stat.S_IFREG | stat.S_IMODE(mode))
            return self._open_handle(node)

    def open(self, path: str, flags: int) -> int:
        with self._mutex:
            node = self._node(path)
            if flags & os.O_TRUNC:
                del node.data[:]
            return self._open_handle(node)

    def release(self, path: str, fh: int) -> int:
        with self._mutex:
            self._handles.pop(fh, None)
            return 0

    def unlink(self, path: str) -> int:
        with self._mutex:
            parent, name = self._parent(path)
            if name not in parent.entries:
                raise mfusepy.FuseOSError(errno.ENOENT)
            if parent.entries[name].is_dir:
                raise mfusepy.FuseOSError(errno.EISDIR)
            del parent.entries[name]
            return 0

    def rmdir(self, path: str) -> int:
        with self._mutex:
            parent, name = self._parent(path)
            node = parent.entries.get(name)
            if node is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            if node.entries:
                raise mfusepy.FuseOSError(errno.ENOTEMPTY)
            del parent.entries[name]
            return 0

    def rename(self, old: str, new: str) -> int:
        with self._mutex:
            source, old_name = self._parent(old)
            target, new_name = self._parent(new)
            if old_name not in source.entries:
                raise mfusepy.FuseOSError(errno.ENOENT)
            node = source.entries[old_name]
            replaced = target.entries.get(new_name)
            if replaced is not None and replaced.is_dir and replaced.entries:
                raise mfusepy.FuseOSError(errno.ENOTEMPTY)
            del source.entries[old_name]
            target.entries[new_name] = node
            return 0

    # ------------------------------------------------------------ data

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self._mutex:
            return bytes(self._file(path, fh).data[offset : offset + size])

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self._mutex:
            node = self._file(path, fh)
            if offset > len(node.data):
                node.data.extend(bytes(offset - len(node.data)))
            node.data[offset : offset + len(data)] = data
            node.mtime = time.time()
            return len(data)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self._mutex:
            node = self._file(path, fh)
            if length < len(node.data):
                del node.data[length:]
            else:
                node.data.extend(bytes(length - len(node.data)))
            return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
        if mode != 0:  # only plain allocation (posix_fallocate) is needed
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        with self._mutex:
            node = self._file(path, fh)
            end = offset + size
            if end > len(node.data):
                node.data.extend(bytes(end - len(node.data)))
            return 0

    # ------------------------------------------------------------ durability

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self._mutex:
            node = self._file(path, fh)
            if self.failing_fsyncs > 0:
                self.failing_fsyncs -= 1
                node.data = bytearray(node.durable_data)  # the dirty pages are gone
                raise mfusepy.FuseOSError(errno.EIO)
            node.durable_data = bytes(node.data)
            self.durable.save_data(node)
            return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        with self._mutex:
            self._sync_entries(self._node(path))
            return 0

    def _sync_entries(self, node: Node) -> None:
        node.durable_entries = {name: (n.ino, n.mode) for name, n in node.entries.items()}
        self.durable.save_entries(node)

    def cut(self, torn_seed: int | None) -> None:
        """The power goes: keep only what is durable (and, torn, some of what is not)."""
        with self._mutex:
            if torn_seed is None:
                return
            rng = random.Random(torn_seed)
            for node in self._all():
                if node.is_dir:
                    now = {name: (n.ino, n.mode) for name, n in node.entries.items()}
                    if now != node.durable_entries and rng.random() < 0.5:
                        self._sync_entries(node)
                elif node.data != node.durable_data:
                    node.durable_data = _torn(node.durable_data, bytes(node.data), rng)
                    self.durable.save_data(node)

    def _all(self) -> list[Node]:
        found, stack = [], [self.root]
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(node.entries.values())
        return found


def _torn(old: bytes, new: bytes, rng: random.Random) -> bytes:
    """What a disk may hold of a file written from `old` to `new` when its power goes:
    each changed page old or new, the size old or new."""
    size = rng.choice([len(old), len(new)])
    image = bytearray(old[:size].ljust(size, b"\0"))
    for start in range(0, size, PAGE):
        end = min(start + PAGE, size)
        if new[start:end] != old[start:end] and rng.random() < 0.5:
            image[start:end] = new[start:end].ljust(end - start, b"\0")
    return bytes(image)


def _control(fs: LazyFS) -> None:
    """Read commands on stdin: `cut drop`, `cut torn SEED`, `fail fsync N`."""
    for line in sys.stdin:
        words = line.split()
        if words[:2] == ["fail", "fsync"]:
            with fs._mutex:
                fs.failing_fsyncs = int(words[2])
            sys.stdout.write("FAILING\n")
            sys.stdout.flush()
        elif words[:1] == ["cut"]:
            fs.cut(int(words[2]) if words[1:2] == ["torn"] else None)
            sys.stdout.write("CUT\n")
            sys.stdout.flush()
            os._exit(0)


def main() -> None:
    backing, mountpoint = Path(sys.argv[1]), sys.argv[2]
    fs = LazyFS(backing)
    threading.Thread(target=_control, args=(fs,), daemon=True).start()
    mfusepy.FUSE(
        fs, mountpoint, foreground=True, max_threads=16, default_permissions=True, direct_io=True
    )


if __name__ == "__main__":
    main()
