"""docs/MIGRATING-FROM-CELERY.md's Python blocks run, in order, in one namespace (as a
reader would paste them), on the in-memory broker they open: the page promises so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).parents[2] / "docs" / "MIGRATING-FROM-CELERY.md"


def test_every_python_block_of_the_migration_page_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert len(blocks) >= 7
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "migrating"}
    try:
        for number, block in enumerate(blocks, 1):
            exec(compile(block, f"{PAGE.name} block {number}", "exec"), namespace)
    finally:
        app = namespace.get("app")
        if app is not None:
            app.close()  # type: ignore[attr-defined]


def test_every_celery_concept_the_issue_names_has_a_row() -> None:
    text = PAGE.read_text()
    for concept in (
        "apply_async", "routing_key", "acks_late", "prefetch", "time_limit", "beat",
        "AsyncResult", "chord", "chain", "group", "signature", "task_prerun", "task_failure",
        "worker_process_init", "bind=True", "task_always_eager", "Flower", "revoke",
    ):  # fmt: skip
        assert concept in text, concept
