"""The README's examples run as written, in order, beside a running server.

A new user runs `make run` in one terminal and the README's examples in another.
This test does the same in a fresh directory: a `brook serve` on ./brook-data
(as `make run`), then every ```sh and ```python block in the README's order,
each in a process of its own (a shell, or the project's Python without its
virtual environment on the PATH, as `.venv/bin/python example.py` would be).
Only the port differs: the server listens on a free one, and the blocks' 8080 is
changed to it. A block preceded by `<!-- not run by tests/test_readme.py: why -->`
is skipped; the README says why beside it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.environment import unmeasured
from tests.served import Served

README = Path(__file__).parents[1] / "README.md"
BLOCK = re.compile(
    r"(<!-- not run by tests/test_readme.py: [^>]*-->\n)?```(sh|python)\n(.*?)```", re.S
)


def blocks() -> list[tuple[str, str, bool]]:
    """(language, code, run?) of every sh and python block, in order."""
    return [
        (language, code, not skipped)
        for skipped, language, code in BLOCK.findall(README.read_text())
    ]


def test_every_block_is_run_or_says_why_not() -> None:
    found = blocks()
    assert sum(run for _, _, run in found) >= 8
    for language, code, run in found:
        assert run or language in ("sh", "python"), code


@pytest.mark.timeout(600)
def test_the_readme_examples_run_in_order_beside_make_run(tmp_path: Path) -> None:
    served = Served(tmp_path / "brook-data")
    try:
        bin_dir = str(Path(sys.executable).parent)
        without_venv = os.pathsep.join(
            p for p in os.environ.get("PATH", "").split(os.pathsep) if p != bin_dir
        )
        base = {
            k: v
            for k, v in unmeasured().items()
            if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")
            and not k.startswith("BROOK_")
        }
        base["SPARK_LOCAL_IP"] = "127.0.0.1"  # this machine's name may not resolve
        for number, (language, code, run) in enumerate(blocks()):
            if not run:
                continue
            code = code.replace("localhost:8080", f"localhost:{served.port}")
            code = code.replace("127.0.0.1:8080", f"127.0.0.1:{served.port}")
            if language == "sh":
                command = ["bash", "-e", "-o", "pipefail", "-c", code]
                env = {**base, "PATH": bin_dir + os.pathsep + without_venv}
            else:
                command = [sys.executable, "-c", code]
                env = {**base, "PATH": without_venv}
            done = subprocess.run(
                command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, (
                f"README block {number} ({language}) failed:\n{code}\n"
                f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
            )
            assert "Traceback" not in done.stderr, done.stderr
    finally:
        served.close()
    assert (tmp_path / "brook.toml").read_text().startswith("[[auth.keys]]")


def test_install_commands_name_the_distribution_not_the_taken_pypi_name() -> None:
    """`brook` on PyPI is another project: every install line says brook-broker."""
    root = Path(__file__).parents[1]
    texts = [root / "README.md", *root.glob("docs/*.md"), *root.glob("src/brook/**/*.py")]
    wrong = re.compile(r"pip install '?brook(\[|\s|'|$)")
    for path in texts:
        for line in path.read_text().splitlines():
            assert not wrong.search(line), f"{path.name}: {line}"
    pyproject = (root / "pyproject.toml").read_text()
    assert '\nname = "brook-broker"\n' in pyproject
