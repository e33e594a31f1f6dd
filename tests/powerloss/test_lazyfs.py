"""lazyfs loses what a power cut loses, and keeps what a sync made durable.

The crash tests trust it to tell a durable write from one that only reached the
page cache; these tests check that it does, through a real mount.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.powerloss.lazyfs import PAGE, _torn
from tests.powerloss.mount import LazyMount, lazy_mount


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[LazyMount]:
    with lazy_mount(tmp_path, "lazyfs's own test") as mounted:
        yield mounted


def sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(path: Path, data: bytes, synced: bool) -> None:
    with path.open("ab") as f:
        f.write(data)
        f.flush()
        if synced:
            os.fsync(f.fileno())


def test_a_cut_keeps_synced_data_and_drops_the_rest(mount: LazyMount) -> None:
    root = mount.mountpoint
    write(root / "log", b"durable", synced=True)
    sync(root)
    write(root / "log", b" lost", synced=False)
    assert (root / "log").read_bytes() == b"durable lost"
    mount.cut()
    assert (root / "log").read_bytes() == b"durable"


def test_a_new_name_needs_its_directory_synced(mount: LazyMount) -> None:
    root = mount.mountpoint
    (root / "folder").mkdir()
    sync(root)
    write(root / "folder" / "kept", b"a", synced=True)
    sync(root / "folder")
    write(root / "folder" / "synced-but-unnamed", b"b", synced=True)
    (root / "unsynced-folder").mkdir()
    mount.cut()
    assert sorted(os.listdir(root)) == ["folder"]
    assert os.listdir(root / "folder") == ["kept"]


def test_a_rename_is_undone_unless_its_directory_is_synced(mount: LazyMount) -> None:
    root = mount.mountpoint
    write(root / "old", b"x", synced=True)
    sync(root)
    os.rename(root / "old", root / "new")
    mount.cut()
    assert os.listdir(root) == ["old"]
    os.rename(root / "old", root / "new")
    sync(root)
    mount.cut()
    assert os.listdir(root) == ["new"]


def test_a_named_file_whose_data_never_synced_comes_back_empty(mount: LazyMount) -> None:
    root = mount.mountpoint
    write(root / "f", b"never synced", synced=False)
    sync(root)
    mount.cut()
    assert (root / "f").read_bytes() == b""


def test_a_torn_cut_leaves_each_page_old_or_new(mount: LazyMount) -> None:
    root = mount.mountpoint
    old = bytes(range(256)) * 64  # four pages
    write(root / "f", old, synced=True)
    sync(root)
    with (root / "f").open("r+b") as f:
        f.write(b"\xff" * (len(old) + PAGE))  # every page changed, one more added
    mount.cut(torn_seed=7)
    image = (root / "f").read_bytes()
    assert len(image) in (len(old), len(old) + PAGE)
    for start in range(0, len(image), PAGE):
        page = image[start : start + PAGE]
        assert page in (old[start : start + PAGE].ljust(len(page), b"\0"), b"\xff" * len(page))


@given(
    old=st.binary(max_size=3 * PAGE),
    new=st.binary(max_size=3 * PAGE),
    seed=st.integers(0, 2**32 - 1),
)
def test_torn_images_are_made_of_old_and_new_pages(old: bytes, new: bytes, seed: int) -> None:
    image = _torn(old, new, random.Random(seed))
    assert len(image) in (len(old), len(new))
    for start in range(0, len(image), PAGE):
        end = min(start + PAGE, len(image))
        page = image[start:end]
        assert page in (
            old[start:end].ljust(end - start, b"\0"),
            new[start:end].ljust(end - start, b"\0"),
        )
