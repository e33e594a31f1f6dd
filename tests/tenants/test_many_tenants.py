"""Many tenants on one small machine (SPEC §11): more topics and endpoints than the
process may hold files open, through a real `brook serve` whose descriptor limit is
set low (soft and hard, as `ulimit -n` or systemd's LimitNOFILE would).

`make test` runs these small (a limit of 256, a few hundred topics); `make
reliability` at full size (BROOK_TENANT_TOPICS=10000, BROOK_TENANT_ENDPOINTS=1000
under a limit of 1,024).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import brook
from tests.delivery.receivers import Receiver, wait_for
from tests.served import Served

TOPICS = int(os.environ.get("BROOK_TENANT_TOPICS", "600"))
ENDPOINTS = int(os.environ.get("BROOK_TENANT_ENDPOINTS", "200"))
OPEN_FILES = int(os.environ.get("BROOK_TENANT_OPEN_FILES", "256"))
SAMPLE = 100


def open_files_of(served: Served) -> int:
    return len(os.listdir(f"/proc/{served.process.pid}/fd"))


def test_more_topics_than_open_files_are_all_acknowledged_and_served_again(
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    data = tmp_path / "data"
    served = Served(data, open_files=OPEN_FILES)
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}") as b:
            for i in range(TOPICS):
                ack = b.topic(f"tenant-{i}").append(b"first of %d" % i)
                assert (ack.partition, ack.offset) == (0, 0), f"topic {i} (seed {seed})"
            assert open_files_of(served) < OPEN_FILES
            busy = rng.sample(range(TOPICS), min(SAMPLE, TOPICS))
            for i in busy:  # a second round over a mix of cold and warm topics
                assert b.topic(f"tenant-{i}").append(b"second").offset == 1, f"seed {seed}"
    finally:
        served.close()  # killed: nothing is closed cleanly
    served = Served(data, open_files=OPEN_FILES)
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}") as b:
            assert len(b.topics()) == TOPICS
            for i in rng.sample(range(TOPICS), min(SAMPLE, TOPICS)):
                records = b.topic(f"tenant-{i}").read(0, 0)
                assert records[0].value == b"first of %d" % i, f"topic {i} (seed {seed})"
                assert len(records) == (2 if i in busy else 1), f"topic {i} (seed {seed})"
            assert b.topic("tenant-0").append(b"after the restart").offset >= 1
            assert open_files_of(served) < OPEN_FILES
    finally:
        served.close()


def test_more_endpoints_than_open_files_deliver_everything(tmp_path: Path) -> None:
    config = tmp_path / "brook.toml"
    config.write_text("delivery_allow_private_networks = true\n")
    served = Served(tmp_path / "data", config=config, open_files=OPEN_FILES)
    try:
        with Receiver() as receiver, brook.connect(f"http://127.0.0.1:{served.port}") as b:
            for i in range(ENDPOINTS):
                b.create_endpoint(f"customer-{i}", f"{receiver.url}/{i}", ["orders"])
            b.topic("orders").append_many([brook.Record(b"order %d" % n) for n in range(3)])
            wait_for(lambda: len(receiver.requests()) >= 3 * ENDPOINTS, 300)
            got: dict[str, list[bytes]] = {}
            for request in receiver.requests():
                got.setdefault(request.path, []).append(request.body)
            assert len(got) == ENDPOINTS
            assert all(
                sorted(bodies) == [b"order 0", b"order 1", b"order 2"] for bodies in got.values()
            )
            assert open_files_of(served) < OPEN_FILES
            status, health = served.request("GET", "/v1/health")
            assert status == 200 and health == {"status": "ok"}
    finally:
        served.close()
