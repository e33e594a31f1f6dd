"""Mounting the power-losing file system (lazyfs.py) for a test, and cutting its power."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.environment import unmeasured
from tests.waiting import slow

ROOT = Path(__file__).parents[2]


def fuse_unusable() -> str | None:
    """Why FUSE cannot be mounted here, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as exc:
        return f"/dev/fuse cannot be opened: {exc.strerror}"
    try:
        import mfusepy  # noqa: F401  (loads libfuse)
    except (ImportError, OSError) as exc:
        return f"libfuse cannot be loaded: {exc}"
    return None


@contextlib.contextmanager
def lazy_mount(folder: Path, needed_by: str) -> Iterator[LazyMount]:
    """A lazyfs mount under `folder` for the test `needed_by`, unmounted after; a test that
    needs one fails, saying why, where FUSE cannot be mounted (it never passes without)."""
    unusable = fuse_unusable()
    assert unusable is None, (
        f"{needed_by} needs FUSE: {unusable} (`make system-packages` installs fuse3)"
    )
    with LazyMount(folder / "disk", folder / "mnt") as mounted:
        yield mounted


class LazyMount:
    """A lazyfs mount at `mountpoint` whose durable image lives in `backing`."""

    def __init__(self, backing: Path, mountpoint: Path) -> None:
        self.backing = backing
        self.mountpoint = mountpoint
        self.process: subprocess.Popen[bytes] | None = None
        self.cuts = 0
        backing.mkdir(parents=True, exist_ok=True)
        mountpoint.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> LazyMount:
        self.mount()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unmount()

    def mount(self) -> None:
        assert self.process is None
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.powerloss.lazyfs",
                str(self.backing),
                str(self.mountpoint),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**unmeasured(), "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"},
            cwd=ROOT,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line != b"READY\n":
            self.process.kill()
            self.process.wait()
            self.process = None
            raise RuntimeError(f"lazyfs did not mount {self.mountpoint}: {line!r}")
        deadline = time.monotonic() + slow(10)
        while not os.path.ismount(self.mountpoint):  # init runs just before the mount is visible
            assert time.monotonic() < deadline, f"{self.mountpoint} never became a mount point"
            time.sleep(0.01)

    def cut(self, torn_seed: int | None = None) -> None:
        """The power goes and comes back: unsynced writes are lost (or, with a seed, torn),
        and the mount serves what survived. Whatever used the mount must be dead."""
        process = self.process
        assert process is not None and process.stdin is not None and process.stdout is not None
        command = "cut drop\n" if torn_seed is None else f"cut torn {torn_seed}\n"
        process.stdin.write(command.encode())
        process.stdin.flush()
        answer = process.stdout.readline()
        assert answer == b"CUT\n", f"lazyfs did not cut: {answer!r}"
        process.wait()
        self._close_pipes()
        self.process = None
        _umount(self.mountpoint)
        self.cuts += 1
        self.mount()

    def fail_fsyncs(self, count: int) -> None:
        """The next `count` fsyncs fail with EIO, each dropping its file's unsynced pages."""
        process = self.process
        assert process is not None and process.stdin is not None and process.stdout is not None
        process.stdin.write(f"fail fsync {count}\n".encode())
        process.stdin.flush()
        answer = process.stdout.readline()
        assert answer == b"FAILING\n", f"lazyfs did not take the fault: {answer!r}"

    def unmount(self) -> None:
        if self.process is None:
            return
        _umount(self.mountpoint)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._close_pipes()
        self.process = None

    def _close_pipes(self) -> None:
        assert self.process is not None
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


def _umount(mountpoint: Path) -> None:
    subprocess.run(["umount", "-l", str(mountpoint)], check=True, capture_output=True)
