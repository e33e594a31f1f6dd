"""One local SparkSession for the whole test run (starting one takes seconds).

It starts after moto's server, so its Python workers inherit the S3
credentials, and with the repository on PYTHONPATH, so they can unpickle test
classes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.s3server import MotoServer

ROOT = str(Path(__file__).parents[2])


@pytest.fixture(scope="session")
def spark(moto: MotoServer) -> Iterator[Any]:
    from brook.spark.session import local_session

    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (ROOT, str(Path(ROOT) / "src"), os.environ.get("PYTHONPATH")) if p
    )
    measured = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("COVERAGE_")}
    try:  # Spark's JVM and Python workers run unmeasured (tests/environment.py)
        session = local_session("brook-tests", **{"spark.ui.showConsoleProgress": "false"})
    finally:
        os.environ.update(measured)
    yield session
    session.stop()
