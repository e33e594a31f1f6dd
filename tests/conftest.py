"""Shared fixtures. Randomized tests print their seed (hypothesis does so itself)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import brook
from brook.broker import Broker


@pytest.fixture(params=["local", "memory"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    """An embedded broker on each storage backend."""
    location = str(tmp_path / "data") if request.param == "local" else "memory://"
    with brook.open(location) as b:
        yield b
