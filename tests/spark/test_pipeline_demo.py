"""The example pipeline (`make pipeline-demo`) runs end to end and checks itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DEMO = Path(__file__).parents[2] / "examples" / "pipeline.py"


def test_the_pipeline_demo_counts_every_closed_window_right(tmp_path: Path) -> None:
    folders = ["--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, str(DEMO), *folders, "--seconds", "12", "--rate", "500"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every count matches a batch recount of the events" in done.stdout
    assert list((tmp_path / "out" / "counts").glob("*.parquet"))
