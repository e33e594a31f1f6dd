"""The `crash` fixture: every crash test runs once with kill -9 and once with power cuts
(tests/crash/crashes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crash.crashes import Crash
from tests.powerloss.mount import lazy_mount


@pytest.fixture(params=["kill9", "power"], ids=["kill9", "power-cut"])
def crash(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Crash]:
    if request.param == "kill9":
        yield Crash("kill9", tmp_path / "data", None)
        return
    with lazy_mount(tmp_path, "a power-loss test") as mount:
        yield Crash("power", mount.mountpoint / "data", mount)
