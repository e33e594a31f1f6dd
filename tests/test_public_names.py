"""The public names: every one `brook` and `brook.models` list is there, and importing
them loads only what they need (a worker or a remote client never the engine, a `brook`
command not the server), since the test suite and users start many processes."""

from __future__ import annotations

import subprocess
import sys

import brook
import brook.models


def test_every_public_name_resolves() -> None:
    for module in (brook, brook.models):
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{module.__name__}.{name}"
        assert sorted(dir(module)) == sorted(set(dir(module)) & {*module.__all__, "__version__"})


def _loaded_after(code: str) -> set[str]:
    shown = "import sys; print(' '.join(sys.modules))"
    found = subprocess.run(
        [sys.executable, "-c", f"{code}; {shown}"], capture_output=True, text=True, check=True
    )
    return set(found.stdout.split())


def test_importing_loads_only_what_is_used() -> None:
    engine = {"brook.core", "brook.broker", "brook.commit.committer"}
    assert not _loaded_after("import brook") & (engine | {"httpx", "brook.client"})
    assert not _loaded_after("import brook; brook.connect('http://127.0.0.1:1')") & engine
    assert not _loaded_after("import brook.tasks") & engine  # what a worker runs
    assert not _loaded_after("import brook.cli") & {"brook.server.app", "brook.tasks", "httpx"}
    assert "brook.core" in _loaded_after("import brook; brook.open('memory://').close()")
