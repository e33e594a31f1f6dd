"""The fuzz targets coverage-guided with atheris: BROOK_FUZZ_RUNS inputs each (2,000 in
`make test`, 200,000 in `make reliability`), no failing input."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.environment import unmeasured
from tests.fuzz.targets import TARGETS

RUNS = int(os.environ.get("BROOK_FUZZ_RUNS", "1000"))
ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_coverage_guided_fuzzing_finds_no_failure(name: str, tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.atheris_run", name, str(RUNS)],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # where libFuzzer would write a failing input
        env={**unmeasured(), "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"},
        timeout=3600,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    done = re.search(r"Done (\d+) runs in (\d+) second", output)
    coverage = re.findall(r"cov: (\d+)", output)
    assert done and int(done.group(1)) == RUNS, output[-2000:]
    print(
        f"{name}: {done.group(1)} inputs in {done.group(2)} s, coverage {coverage[-1]} edges, no failure"
    )
