"""What `make run` installs is enough to run Brook: every package the broker's modules
import is a runtime dependency in pyproject.toml, not one that only the test extras
happen to bring (`cryptography` came with moto for a while, and a fresh `make run`
failed at import)."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]
SRC = ROOT / "src" / "brook"
EXTRAS_ONLY = {
    "spark/": {"pyspark", "pyarrow", "pandas", "numpy"},
    "lake/": {"pyarrow", "numpy"},
    "cli/spark.py": {"pyspark"},
}
"""Imports that come with the spark and lake extras, and where they may be (the lake
and `brook spark` say which extra to install when it is missing)."""


def _requirement_name(spec: str) -> str:
    for stop in "=<>![ ;":
        spec = spec.split(stop)[0]
    return spec.strip().lower().replace("_", "-")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_every_import_of_the_broker_is_a_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_requirement_name(spec) for spec in project["dependencies"]}
    providers = importlib.metadata.packages_distributions()
    missing = []
    for path in sorted(SRC.rglob("*.py")):
        inside = path.relative_to(SRC).as_posix()
        allowed = set().union(*(v for k, v in EXTRAS_ONLY.items() if inside.startswith(k)))
        for name in sorted(_imports(path)):
            if (
                name in sys.stdlib_module_names
                or name in ("brook", "__future__")
                or name in allowed
            ):
                continue
            distributions = {d.lower().replace("_", "-") for d in providers.get(name, [])}
            if not distributions & runtime:
                missing.append(
                    f"{path.relative_to(ROOT)} imports {name} ({distributions or 'no package'})"
                )
    assert not missing, "not in pyproject.toml's dependencies:\n" + "\n".join(missing)
