"""The example pipeline (`make pipeline-demo`) runs end to end and checks itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.environment import unmeasured

pytestmark = pytest.mark.slow

DEMO = Path(__file__).parents[2] / "examples" / "pipeline.py"
MASTER = os.environ.get("BROOK_DEMO_MASTER", "local[2]")
"""local[2] in make test, as `make pipeline-demo` runs it; `make reliability` runs it on
local-cluster[2,1,1024] too (executors in JVMs of their own, as on a real cluster: half a
minute more to start, and tests/spark/test_cluster.py covers the cluster's sink in make test)."""


def test_the_pipeline_demo_counts_every_closed_window_right(tmp_path: Path) -> None:
    folders = ["--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [
            sys.executable,
            str(DEMO),
            *folders,
            *("--seconds", "8", "--rate", "500", "--master", MASTER),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=unmeasured(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every count matches a batch recount of the events" in done.stdout
    held = re.search(r"the lake holds (\d+) events in (\d+) Parquet files", done.stdout)
    assert held and int(held[1]) > 0 and int(held[2]) > 0, done.stdout  # history from the lake
    assert "recounted the events' history from the lake's table" in done.stdout
    assert list((tmp_path / "out" / "counts").glob("*.parquet"))
