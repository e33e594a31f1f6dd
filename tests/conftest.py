"""Shared fixtures. Randomized tests print their seed (hypothesis does so itself)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.broker import Broker
from tests.served import Served


@pytest.fixture(params=["local", "memory", "remote"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """One API, three ways: embedded on disk, embedded in memory, and over HTTP
    (`brook serve` in a subprocess, reached with brook.connect)."""
    if request.param == "remote":
        server = Served(tmp_path / "served")
        client = brook.connect(f"http://127.0.0.1:{server.port}")
        yield client
        client.close()
        server.close()
        return
    location = str(tmp_path / "data") if request.param == "local" else "memory://"
    with brook.open(location) as b:
        yield b


@pytest.fixture(params=["local", "memory"])
def embedded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    """An embedded broker, for tests that look inside it."""
    location = str(tmp_path / "data") if request.param == "local" else "memory://"
    with brook.open(location) as b:
        yield b
