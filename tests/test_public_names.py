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
    assert sorted(dir(brook)) == sorted(set(dir(brook)) & {*brook.__all__, "__version__"})


def _loaded_after(code: str) -> set[str]:
    shown = "import sys; print(' '.join(sys.modules))"
    found = subprocess.run(
        [sys.executable, "-c", f"{code}; {shown}"], capture_output=True, text=True, check=True
    )
    return set(found.stdout.split())


ENGINE_PACKAGES = (
    "brook.core",
    "brook.commit",
    "brook.log",
    "brook.queue",
    "brook.timers",
    "brook.delivery",
    "brook.storage",
    "brook.broker",
    "brook.joins",
    "brook.lake",
)


def _engine(modules: set[str]) -> set[str]:
    return {m for m in modules for p in ENGINE_PACKAGES if m == p or m.startswith(p + ".")}


def test_the_public_types_and_the_client_load_no_part_of_the_engine() -> None:
    """models.py is a leaf (River's rivertype): the remote client, the API's Protocols and
    the task layer take their types from it without loading a committer or a queue."""
    for code in (
        "import brook.client.sync",
        "import brook.client.aio",
        "import brook.api",
        "import brook.models",
    ):
        assert not _engine(_loaded_after(code)), code
    # A worker checks its tasks' queue settings with the queue's pure rules (queue/settings.py,
    # queue/lifecycle.py), and loads nothing that holds state.
    pure_rules = {"brook.queue", "brook.queue.settings", "brook.queue.lifecycle"}
    assert not _engine(_loaded_after("import brook.tasks")) - pure_rules


def test_importing_loads_only_what_is_used() -> None:
    engine = {"brook.core", "brook.broker", "brook.commit.committer"}
    assert not _loaded_after("import brook") & (engine | {"httpx", "brook.client"})
    assert not _loaded_after("import brook; brook.connect('http://127.0.0.1:1')") & engine
    assert not _loaded_after("import brook.tasks") & engine  # what a worker runs
    assert not _loaded_after("import brook.cli") & {"brook.server.app", "brook.tasks", "httpx"}
    assert "brook.core" in _loaded_after("import brook; brook.open('memory://').close()")
