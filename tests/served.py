"""A real `brook serve` process on 127.0.0.1 and a small HTTP client for it, for any test."""

from __future__ import annotations

import functools
import http.client
import json
import os
import re
import resource
import ssl
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.environment import unmeasured

SRC = str(Path(__file__).parents[1] / "src")


READY_S = 60


def _limit_files(count: int) -> None:
    """In the child, before exec: at most `count` open files, soft and hard (as
    `ulimit -n` in a shell, or systemd's LimitNOFILE)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))


class Served:
    """One `brook serve` subprocess; stopped by pid when the test ends."""

    def __init__(
        self,
        data: Path,
        *args: str,
        config: Path | None = None,
        tls: ssl.SSLContext | None = None,
        env: dict[str, str] | None = None,
        measured: bool = False,
        open_files: int | None = None,
    ) -> None:
        """`measured`: run under coverage, for a test that stops the server with SIGTERM
        (`stop`), so it writes its data; `close` kills it, and a killed server never does.
        `open_files`: the process's descriptor limit, soft and hard."""
        inherited = dict(os.environ) if measured else unmeasured()
        environment = {**inherited, "PYTHONPATH": SRC, "BROOK_LOG_LEVEL": "info", **(env or {})}
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
            preexec_fn=None if open_files is None else functools.partial(_limit_files, open_files),
        )
        assert self.process.stderr is not None
        self.log: list[str] = []
        """What the server logged so far (read all along, so its pipe never fills)."""
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        # Waits on the reader's event, not on the pipe: a read may take several lines
        # at once, and a select on the pipe would not see the ones already buffered.
        self._ready.wait(READY_S)
        if self._ready.is_set() and hasattr(self, "port"):
            return
        self.close()
        raise AssertionError("brook serve did not start:\n" + "".join(self.log))

    def _read_log(self) -> None:
        assert self.process.stderr is not None
        try:
            for line in self.process.stderr:
                self.log.append(line)
                found = re.search(r"listening on https?://127\.0\.0\.1:(\d+) .*; ready", line)
                if found and not self._ready.is_set():
                    self.port = int(found.group(1))
                    self._ready.set()
        except (ValueError, OSError):
            pass  # the pipe was closed under us
        finally:
            self._ready.set()  # the server exited (or its log ended): stop waiting

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str | None] | None = None,
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
            elif body is not None:
                # Bytes are one raw record unless the caller says otherwise; a content-type
                # of None sends none at all.
                headers.setdefault("content-type", "application/octet-stream")
            headers = {name: value for name, value in headers.items() if value is not None}
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
        self._reader.join(timeout=10)  # the log ends with the process
        if self.process.stderr is not None:
            self.process.stderr.close()
