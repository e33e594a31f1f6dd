"""Writes tests/upgrade/cascade/: a data directory from the Brook before dead-letter
names were reserved (ef4df89), caught in the cascade it had: two endpoints on `x.*`
whose receiver answered 400 (max_attempts 1), each taking the other's dead letters
(`x.1.a.dlq`, `x.1.a.dlq.b.dlq`, ...), and a healthy third endpoint.

Run with that Brook on the path: `PYTHONPATH=<its src> python -m tests.upgrade.make_cascade_fixture`.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import brook
from tests.delivery.receivers import Answer, Receiver

HERE = Path(__file__).parent / "cascade"
TOPICS_AT_LEAST = 6


def main() -> None:
    shutil.rmtree(HERE, ignore_errors=True)
    HERE.mkdir()
    with (
        Receiver(lambda got: Answer(400)) as refusing,
        Receiver() as healthy,
        brook.open(str(HERE / "data"), delivery_allow_private_networks=True) as b,
    ):
        for name in ("a", "b"):
            b.create_endpoint(name, refusing.url, ["x.*"], max_attempts=1)
        b.create_endpoint("c", healthy.url, ["x.*"])
        b.topic("x.1").append(b"the first record")
        deadline = time.monotonic() + 60
        while len(b.topics()) < TOPICS_AT_LEAST:
            assert time.monotonic() < deadline, "no cascade"
            time.sleep(0.05)
        for endpoint in ("a", "b", "c"):
            b.endpoint(endpoint).disable()  # caught as it was; the test enables them
    with brook.open(str(HERE / "data"), read_only=True) as b:
        expected = {
            info.name: {str(p): end for p, end in info.end_offsets.items()} for info in b.topics()
        }
    (HERE / "expected.json").write_text(json.dumps({"topics": expected}, indent=1) + "\n")


if __name__ == "__main__":
    main()
