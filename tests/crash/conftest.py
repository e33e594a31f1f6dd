"""The `crash` fixture: every crash test runs once with kill -9 and once with power cuts
(tests/crash/crashes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crash.crashes import Crash
from tests.powerloss.mount import LazyMount, fuse_unusable


@pytest.fixture(params=["kill9", "power"], ids=["kill9", "power-cut"])
def crash(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Crash]:
    if request.param == "kill9":
        yield Crash("kill9", tmp_path / "data", None)
        return
    unusable = fuse_unusable()
    assert unusable is None, (
        f"power-loss tests need FUSE: {unusable} (`make system-packages` installs fuse3)"
    )
    with LazyMount(tmp_path / "disk", tmp_path / "mnt") as mount:
        yield Crash("power", mount.mountpoint / "data", mount)
