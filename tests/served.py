"""A real `brook serve` process on 127.0.0.1 and a small HTTP client for it, for any test."""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SRC = str(Path(__file__).parents[2] / "src")


READY_S = 60


class Served:
    """One `brook serve` subprocess; stopped by pid when the test ends."""

    def __init__(
        self,
        data: Path,
        *args: str,
        config: Path | None = None,
        tls: ssl.SSLContext | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        environment = {**os.environ, "PYTHONPATH": SRC, "BROOK_LOG_LEVEL": "info", **(env or {})}
        before = ["--config", str(config)] if config is not None else []
        self.tls = tls
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "brook.cli",
                *before,
                "serve",
                "--data",
                str(data),
                "--port",
                "0",
                *args,
            ],
            stderr=subprocess.PIPE,
            env=environment,
            text=True,
        )
        assert self.process.stderr is not None
        self.log: list[str] = []
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select(
                [self.process.stderr], [], [], max(0.0, deadline - time.monotonic())
            )
            if not ready:
                break
            line = self.process.stderr.readline()
            if not line:
                break
            self.log.append(line)
            found = re.search(r"listening on https?://127\.0\.0\.1:(\d+) .*; ready", line)
            if found:
                self.port = int(found.group(1))
                return
        self.close()
        raise AssertionError("brook serve did not start:\n" + "".join(self.log))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> tuple[int, Any]:
        """Send one request; returns the status and the body (decoded if JSON, else text)."""
        connection: http.client.HTTPConnection
        if self.tls is not None:
            connection = http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=timeout, context=self.tls
            )
        else:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = dict(headers or {})
            if body is not None and not isinstance(body, bytes):
                body = json.dumps(body).encode()
                headers.setdefault("content-type", "application/json")
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            if not data:
                return response.status, None
            if response.getheader("content-type", "").startswith("application/json"):
                return response.status, json.loads(data)
            return response.status, data.decode()
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
