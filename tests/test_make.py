"""The two commands of the README, as `make` plans them on a fresh checkout (no .venv):
`make run` installs the broker's own dependencies only (a small, quick .venv: no test,
benchmark or Spark extras), and every target that needs the extras installs them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[1]


def planned(target: str, checkout: Path) -> list[str]:
    result = subprocess.run(
        ["make", "-n", target], cwd=checkout, capture_output=True, text=True, check=True
    )
    return [line for line in result.stdout.splitlines() if "pip install" in line]


def test_make_run_installs_only_the_runtime_and_the_rest_add_the_extras(tmp_path: Path) -> None:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    run = planned("run", tmp_path)
    assert run and all("[" not in line for line in run), run
    assert any(line.endswith("-e .") for line in run), run
    for target in ("test", "bench", "reliability", "pipeline-demo", "lint"):
        assert any("-e '.[dev,bench,spark]'" in line for line in planned(target, tmp_path)), target
