"""A `brook serve` with two API keys, for the dashboard's login and scope tests."""

from __future__ import annotations

from pathlib import Path

from brook.config import key_stanza
from tests.served import Served


def serve_with_keys(
    tmp_path: Path, admin: str, reader: str, reader_topics: list[str], reader_name: str = "watcher"
) -> Served:
    """Served with `admin` (named "ops": admin, produce and consume on every topic) and
    `reader` (consume only, on `reader_topics`), as `brook keys create` writes them."""
    config = tmp_path / "brook.toml"
    config.write_text(
        key_stanza("ops", admin, ["admin", "produce", "consume"], ["*"])
        + key_stanza(reader_name, reader, ["consume"], reader_topics)
    )
    return Served(tmp_path / "data", config=config)
