"""The two commands of the README, as `make` plans them on a fresh checkout (no .venv):
`make run` installs the broker's own dependencies only (a small, quick .venv: no test,
benchmark or Spark extras), and every target that needs the extras installs them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def planned(target: str, checkout: Path) -> list[str]:
    result = subprocess.run(
        ["make", "-n", target], cwd=checkout, capture_output=True, text=True, check=True
    )
    return [line for line in result.stdout.splitlines() if "pip install" in line]


def test_make_run_installs_only_the_runtime_and_the_rest_add_the_extras(tmp_path: Path) -> None:
    for name in ("Makefile", "pyproject.toml", "setup.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    run = planned("run", tmp_path)
    assert run and all("[" not in line for line in run), run
    assert any(line.endswith("-e .") for line in run), run
    for target in ("test", "bench", "reliability", "pipeline-demo", "lint"):
        assert any("-e '.[dev,bench,spark]'" in line for line in planned(target, tmp_path)), target


def test_make_compiles_again_when_a_compiled_module_s_source_changes(tmp_path: Path) -> None:
    """What runs compiled is never older than its source: every target with the extras
    compiles again after an edit, and not otherwise; `make run` serves at once and
    compiles beside the broker, in the background, when its build is missing or older
    than a source (brook/compiled.py runs the Python until the build is whole)."""
    from brook import compiled

    for name in ("Makefile", "pyproject.toml", "setup.py", "src/brook/compiled.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    sources = [tmp_path / compiled.source_of(m).relative_to(ROOT) for m in compiled.MODULES]
    for source in sources:
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text("")
    (tmp_path / ".venv").mkdir()
    for built in (".venv/.runtime-stamp", ".venv/.installed-stamp", ".venv/.compiled-stamp"):
        (tmp_path / built).write_text("")
    rebuild = "pip install --quiet --disable-pip-version-check --no-deps -e ."
    assert not any(rebuild in line for line in planned("test", tmp_path))
    assert _up_to_date(tmp_path)
    later = (tmp_path / ".venv/.compiled-stamp").stat().st_mtime + 10
    os.utime(sources[-1], (later, later))
    assert any(rebuild in line for line in planned("test", tmp_path))
    assert not _up_to_date(tmp_path)  # so `make run` starts the compiler beside the broker
    run = subprocess.run(["make", "-n", "run"], cwd=tmp_path, capture_output=True, text=True)
    assert "compiling the hot path in the background" in run.stdout
    assert "brook serve" in run.stdout


def _up_to_date(checkout: Path) -> bool:
    """What `make run` asks before serving: is the compiled build current?"""
    asked = subprocess.run(["make", "-q", ".venv/.compiled-stamp"], cwd=checkout)
    return asked.returncode == 0


def test_make_run_installs_without_compiling(tmp_path: Path) -> None:
    for name in ("Makefile", "pyproject.toml", "setup.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    (runtime,) = [line for line in planned("run", tmp_path) if line.endswith("-e .")]
    assert runtime.startswith("BROOK_COMPILE=0 ")


def test_make_pipeline_demo_takes_the_running_broker_s_url(tmp_path: Path) -> None:
    for name in ("Makefile", "pyproject.toml", "setup.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    planned_run = subprocess.run(
        ["make", "-n", "pipeline-demo", "URL=http://127.0.0.1:8080"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "examples/pipeline.py --data ./brook-data --out ./pipeline-demo --url " in planned_run


def test_the_pipeline_demo_beside_a_broker_says_how_to_point_at_it(tmp_path: Path) -> None:
    """Without a URL, beside a broker holding the directory (as `make run` does), the demo
    stops at once and says how to give the running broker's address."""
    from tests.served import Served

    data = tmp_path / "data"
    server = Served(data)
    try:
        env = {k: v for k, v in os.environ.items() if k != "BROOK_URL"}
        result = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "pipeline.py"), "--data", str(data)],
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
            cwd=tmp_path,
        )
    finally:
        server.close()
    assert result.returncode != 0
    assert "make pipeline-demo URL=http://127.0.0.1:PORT" in result.stderr, result.stderr[-2000:]
    assert "BROOK_URL" in result.stderr
