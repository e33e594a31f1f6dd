"""A real `brook serve` process on 127.0.0.1 and a small HTTP client for it."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SRC = str(Path(__file__).parents[2] / "src")


class Served:
    """One `brook serve` subprocess; stopped by pid when the test ends."""

    def __init__(self, data: Path, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": SRC, "BROOK_LOG_LEVEL": "info"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "brook.cli", "serve", "--data", str(data), "--port", "0", *args],
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert self.process.stderr is not None
        self.log: list[str] = []
        for line in self.process.stderr:
            self.log.append(line)
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+); ready", line)
            if found:
                self.port = int(found.group(1))
                return
        raise AssertionError("brook serve did not start:\n" + "".join(self.log))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> tuple[int, Any]:
        """Send one request; returns the status and the decoded JSON body."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = dict(headers or {})
            if body is not None and not isinstance(body, bytes):
                body = json.dumps(body).encode()
                headers.setdefault("content-type", "application/json")
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            return response.status, json.loads(data) if data else None
        finally:
            connection.close()

    def stop(self) -> int:
        self.process.terminate()
        try:
            return self.process.wait(timeout=30)
        finally:
            self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path / "data")
    yield server
    server.close()
