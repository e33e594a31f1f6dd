"""moto's S3 server as a real HTTP server on 127.0.0.1, for the tests that need a bucket
(with its conditional PUTs atomic, as S3's are: tests/moto_atomic.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import httpx

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "brook-test",
    "AWS_SECRET_ACCESS_KEY": "brook-test",
    "AWS_DEFAULT_REGION": "us-east-1",
}
BUCKET = "brook-test"


class MotoServer:
    """One moto server subprocess; stopped by pid."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.moto_atomic", "-H", "127.0.0.1", "-p", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **CREDENTIALS},
            cwd=Path(__file__).parents[1],
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            found = re.search(r"Running on http://127\.0\.0\.1:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                break
        else:
            raise RuntimeError("moto's server did not start")
        # Keep draining its request log so it never blocks on a full pipe.
        self._drain = threading.Thread(target=self.process.stdout.read, daemon=True)
        self._drain.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        httpx.put(f"{self.endpoint}/{BUCKET}").raise_for_status()

    def fresh_url(self) -> str:
        """An s3:// URL of a prefix nobody has used."""
        return f"s3://{BUCKET}/{uuid.uuid4().hex}"

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._drain.join(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()
