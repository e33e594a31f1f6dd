"""Fixtures shared by the delivery tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.served import Served


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A real `brook serve` that may deliver to the loopback receivers of the tests."""
    config = tmp_path / "brook.toml"
    config.write_text("delivery_allow_private_networks = true\n")
    server = Served(tmp_path / "data", config=config)
    yield server
    server.close()
