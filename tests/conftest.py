"""Shared fixtures. Randomized tests print their seed (hypothesis does so itself)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import brook
from brook.broker import Broker
from tests.s3server import CREDENTIALS, MotoServer
from tests.served import Served

os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")
"""The JVMs tests start (Spark's, and its executors') run small jobs for seconds: the
client compiler alone serves them with a third less CPU than the JVM's default of both
compilers (`brook spark queue` on a small group: 47 s → 31 s beside a chaos run, median
of two), and `make test` is bound by its two cores. Users' jobs keep the default."""

settings.register_profile("brook", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("brook")
"""Hypothesis checks what is generated, not how fast: its time checks (a 200 ms deadline
per example, a health check on slow generation) fail on a busy machine with no wrong
answer (`test_every_truncation_is_rejected` at load 12). Speed is for the benchmarks."""

LONG_FIRST = (
    "spark/test_cluster.py",
    "chaos/test_chaos.py",
    "spark/test_pipeline_demo.py",
    "test_readme.py",
    "spark/test_jobs.py",
    "spark/test_queue.py",
    "tasks/test_worker.py",
    "ui/test_browser.py",
    "crash/test_kill9_timers.py",
    "crash/test_kill9_queue.py",
)
"""Test files of a minute or more (`make test`'s --durations): started first, so the
run does not end on one long test while the other processes idle."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` runs the suite on several processes (pytest-xdist, `--dist
    loadgroup`): the tests of the shared SparkSession all go to one of them, so the
    run starts one session (a JVM); Spark tests that start their own (a cluster, a
    command) go anywhere. The long ones and the session's group are handed out first."""
    root = Path(__file__).parent
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))

    def rank(item: pytest.Item) -> int:
        where = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        if where in LONG_FIRST:
            return LONG_FIRST.index(where)
        return len(LONG_FIRST) if item.get_closest_marker("xdist_group") else len(LONG_FIRST) + 1

    items.sort(key=rank)


@pytest.fixture(scope="session")
def moto() -> Iterator[MotoServer]:
    """moto's S3 server, shared by the session; each test takes a fresh prefix."""
    saved = {name: os.environ.get(name) for name in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    server = MotoServer()
    yield server
    server.close()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(params=["local", "memory", "s3", "remote"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """One API, four ways: embedded on disk, in memory, on S3 (moto's server), and over
    HTTP (`brook serve` in a subprocess, reached with brook.connect)."""
    if request.param == "s3":
        moto: MotoServer = request.getfixturevalue("moto")
        with brook.open(
            moto.fresh_url(), endpoint_url=moto.endpoint, cache_dir=str(tmp_path / "cache")
        ) as b:
            yield b
        return
    if request.param == "remote":
        server = Served(tmp_path / "served")
        client = brook.connect(f"http://127.0.0.1:{server.port}")
        yield client
        client.close()
        server.close()
        return
    location = str(tmp_path / "data") if request.param == "local" else "memory://"
    with brook.open(location) as b:
        yield b


@pytest.fixture(params=["local", "memory"])
def embedded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    """An embedded broker, for tests that look inside it."""
    location = str(tmp_path / "data") if request.param == "local" else "memory://"
    with brook.open(location) as b:
        yield b
