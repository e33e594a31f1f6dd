"""A bug answers 500 internal (never 503, which tells clients to retry), logged once."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import brook
from tests.in_process import InProcess


def test_an_unexpected_exception_is_500_internal_with_its_traceback_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    with brook.open(str(tmp_path)) as b:
        server = InProcess(b)
        try:

            def broken(*args: Any) -> Any:
                raise RuntimeError("a bug")

            monkeypatch.setattr(b, "topics", broken)
            logger = logging.getLogger("brook.server")
            logger.addHandler(caplog.handler)  # whether or not brook's logs propagate
            try:
                status, answer = server.get("/v1/topics")
            finally:
                logger.removeHandler(caplog.handler)
            assert status == 500
            assert answer == {
                "error": {"code": "internal", "message": "internal error; see the server log"}
            }
            assert any("a bug" in r.exc_text for r in caplog.records if r.exc_text)
        finally:
            server.close()
