"""The hot path, compiled: which modules, whether they run compiled, and the switch back.

The modules below turn a request's bytes into records and records into a batch: pure
computation on the event loop's thread, where the profiles put much of a request's
time (docs/PERFORMANCE.md, "Compiled"). Installing Brook compiles them with Cython
(setup.py), unchanged: the same source runs as Python or compiled, so there is one
program to read, test and debug, and any machine without a C compiler still runs it.
The I/O orchestration (HTTP framing, handlers, the committer's threads) is left out
on purpose: compiled, it measured slower, since compiled code keeps the GIL past the
switch interval that the event loop and the committer's threads share.

- `BROOK_PURE=1` in the environment runs them as Python (the .py files beside the
  compiled ones); `make test` runs their tests both ways.
- A compiled module is used only while it matches its source: setup.py records each
  source's SHA-256 in `compiled.json` beside the modules, and a module whose source
  changed since (an edit without a rebuild) runs as Python, with a warning that says
  how to rebuild, rather than as stale machine code.
- A compiled file of a module no longer listed (an older build's leftover, which
  Python would still prefer to the .py) is never run either.
- `BROOK_COMPILE=0 pip install -e .` installs without compiling.

This module imports nothing of Brook's: `brook/__init__.py` imports it first, and
importing it installs the switch, before any of these modules is imported.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

MODULES = (
    "brook.codec.batch",
    "brook.duplicate_keys",
    "brook.records",
    "brook.validate",
    "brook.wire.core",
)
"""Compiled when installed; setup.py reads this tuple (it cannot import Brook)."""

SOURCES_FILE = "compiled.json"
"""{module: SHA-256 of the source it was compiled from}, written by setup.py."""

ROOT = Path(__file__).parent


def source_of(module: str) -> Path:
    return ROOT.parent.joinpath(*module.split(".")).with_suffix(".py")


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _AsPython(importlib.abc.MetaPathFinder):
    """Finds the listed modules as their .py source, ahead of the compiled files."""

    def __init__(self, modules: frozenset[str]) -> None:
        self.modules = modules

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.modules:
            return None
        return importlib.util.spec_from_file_location(fullname, source_of(fullname))


def _built_digests() -> dict[str, str]:
    try:
        recorded = json.loads((ROOT / SOURCES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def stale() -> list[str]:
    """The compiled modules whose source changed after they were built, or whose
    build has not finished: a compiled file that compiled.json (written last) does not
    list may be half copied (`make run` compiles beside a running broker)."""
    built = _built_digests()
    return [
        module
        for module in MODULES
        if (module in built and source_digest(source_of(module)) != built[module])
        or (module not in built and _compiled_file(module) is not None)
    ]


def _compiled_file(module: str) -> Path | None:
    source = source_of(module)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        found = source.with_name(source.stem + suffix)
        if found.exists():
            return found
    return None


def leftovers() -> list[str]:
    """Modules with a compiled file beside their source that are not listed: an older
    build compiled them (the build deletes such files; an older checkout may not)."""
    listed = set(MODULES)
    found = []
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for path in ROOT.rglob("*" + suffix):
            parts = path.relative_to(ROOT.parent).parts
            module = ".".join([*parts[:-1], path.name[: -len(suffix)]])
            if module not in listed and source_of(module).exists():
                found.append(module)
    return sorted(set(found))


def install_switch() -> None:
    """Run the listed modules as Python where asked (BROOK_PURE) or where the compiled
    file is stale. Idempotent; called once, first, by brook/__init__.py."""
    if any(isinstance(finder, _AsPython) for finder in sys.meta_path):
        return
    left = leftovers()
    if os.environ.get("BROOK_PURE", "") not in ("", "0"):
        as_python = frozenset(MODULES) | frozenset(left)
    else:
        as_python = frozenset(stale()) | frozenset(left)
        if as_python:
            warnings.warn(
                f"brook: {', '.join(sorted(as_python))} changed since compiled (or are no "
                "longer compiled); running as Python until rebuilt (`make`, or `pip install "
                "-e .`)",
                RuntimeWarning,
                stacklevel=2,
            )
    if as_python:
        sys.meta_path.insert(0, _AsPython(as_python))


def running_compiled() -> list[str]:
    """The listed modules that are loaded compiled (imports them)."""
    loaded = []
    for module in MODULES:
        imported = importlib.import_module(module)
        if not (imported.__file__ or "").endswith(".py"):
            loaded.append(module)
    return loaded


install_switch()
