"""The example pipeline (`make pipeline-demo`) runs end to end and checks itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.environment import unmeasured

pytestmark = pytest.mark.slow

DEMO = Path(__file__).parents[2] / "examples" / "pipeline.py"


def test_the_pipeline_demo_counts_every_closed_window_right_on_a_cluster(tmp_path: Path) -> None:
    """On Spark's local-cluster mode: executors in JVMs of their own, as on a real cluster
    (`make pipeline-demo` runs the same code on local[2])."""
    folders = ["--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [
            sys.executable,
            str(DEMO),
            *folders,
            *("--seconds", "8", "--rate", "500", "--master", "local-cluster[2,1,1024]"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=unmeasured(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every count matches a batch recount of the events" in done.stdout
    assert list((tmp_path / "out" / "counts").glob("*.parquet"))
