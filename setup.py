"""Compiles the hot path's modules with Cython (the list: src/brook/compiled.py).

Everything else about the package is in pyproject.toml. `BROOK_COMPILE=0` installs
without compiling; the modules then run as Python, as they do under `BROOK_PURE=1`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

SRC = Path(__file__).parent / "src"


def compiled_modules() -> tuple[str, ...]:
    """MODULES from brook/compiled.py, read without importing Brook."""
    tree = ast.parse((SRC / "brook" / "compiled.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "MODULES":
            return tuple(ast.literal_eval(node.value))
    raise SystemExit("setup.py: no MODULES in src/brook/compiled.py")


def source(module: str) -> Path:
    return SRC.joinpath(*module.split(".")).with_suffix(".py")


class BuildRecordingSources(build_ext):
    """Also writes brook/compiled.json: each module's source digest, so a compiled file
    whose source changed later is known stale (brook/compiled.py)."""

    def run(self) -> None:
        if self.inplace:
            _delete_leftovers({extension.name for extension in self.extensions})
        super().run()
        digests = {
            extension.name: hashlib.sha256(source(extension.name).read_bytes()).hexdigest()
            for extension in self.extensions
        }
        text = json.dumps(digests, indent=1, sort_keys=True) + "\n"
        # In place (an editable install) beside the sources; else into the build.
        target = (SRC if self.inplace else Path(self.build_lib)) / "brook" / "compiled.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def _delete_leftovers(listed: set[str]) -> None:
    """Compiled files (and their C) of modules no longer listed: Python would prefer the
    compiled file to the edited source."""
    for path in [*SRC.rglob("*.so"), *SRC.rglob("*.c")]:
        module = ".".join(path.relative_to(SRC).with_suffix("").parts).split(".cpython")[0]
        if module.startswith("brook.") and module not in listed:
            path.unlink()


def extensions() -> list:
    if os.environ.get("BROOK_COMPILE", "1") == "0":
        return []
    from Cython.Build import cythonize
    from setuptools import Extension

    modules = [
        Extension(module, [str(source(module).relative_to(Path(__file__).parent))])
        for module in compiled_modules()
    ]
    return cythonize(
        modules,
        compiler_directives={
            "language_level": 3,
            # Annotations stay documentation: the compiled module accepts what the
            # Python one does (a typed argument would refuse a subclass or None).
            "annotation_typing": False,
            "binding": True,
        },
        nthreads=os.cpu_count() or 1,
        quiet=True,
    )


setup(
    ext_modules=extensions(),
    cmdclass={"build_ext": BuildRecordingSources},
    # The C compiler on every core: the build is most of a fresh install's time.
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
