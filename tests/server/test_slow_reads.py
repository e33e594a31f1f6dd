"""A slow storage read (a cold disk, an S3 cache miss) never delays other requests:
reads and polls run off the event loop."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import brook
from brook.storage.faulty import FaultyStorage
from brook.storage.local import LocalStorage
from tests.in_process import InProcess

SLOW_S = 1.5


@pytest.mark.parametrize(
    "slow_path",
    [
        "/v1/topics/slow/records?offset=0&limit=10",
        "/v1/topics/slow/groups/g/poll?max_records=10",
    ],
)
def test_a_slow_read_does_not_hold_up_other_requests(tmp_path: Path, slow_path: str) -> None:
    storage = FaultyStorage(LocalStorage(tmp_path / "data"))
    with brook.Broker(storage) as b:
        b.topic("slow").append_many([brook.Record(b"%d" % i) for i in range(10)])
        server = InProcess(b)
        try:
            storage.faults.read_delay_s = SLOW_S
            answers: dict[str, object] = {}
            slow = threading.Thread(
                target=lambda: answers.setdefault("slow", server.get(slow_path))
            )
            began = time.monotonic()
            slow.start()
            time.sleep(0.2)  # the slow read is under way
            status, _ = server.get("/v1/health")
            health_s = time.monotonic() - began
            status_append, _ = server.request("POST", "/v1/topics/other/records?key=k", b"v")
            other_s = time.monotonic() - began
            slow.join()
            slow_s = time.monotonic() - began
            assert (status, status_append) == (200, 200)
            assert health_s < SLOW_S and other_s < SLOW_S, (
                f"other requests waited for the slow read: {health_s:.2f} s, {other_s:.2f} s"
            )
            assert slow_s >= SLOW_S
            code, document = answers["slow"]  # type: ignore[misc]
            assert code == 200 and len(document["records"]) == 10
        finally:
            storage.faults.read_delay_s = 0
            server.close()
