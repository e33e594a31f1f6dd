"""The central promise on S3: the VM and its disk die, and nothing acknowledged is lost.

`brook serve --storage s3://...` (moto's server) takes HTTP producers; it is killed
with SIGKILL at a random moment, its data directory and cache are deleted, and a
broker on a new, empty machine must serve every acknowledged record, byte for
byte, at its offset, and every committed group position. Set BROOK_SEED to replay.
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from pathlib import Path

import pytest

import brook
from tests.crash.test_kill9_server import PRODUCERS, check_acknowledged, produce, value_for
from tests.s3server import MotoServer
from tests.served import Served

DEATHS = int(os.environ.get("BROOK_MACHINE_DEATHS", "2"))
LEASE_MS = 2_000
"""Short, so each new machine waits out its dead predecessor's lease quickly."""


@pytest.mark.crash
def test_a_dead_machine_loses_nothing_the_bucket_acknowledged(
    moto: MotoServer, tmp_path: Path
) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"machine death test seed: {seed} (replay with BROOK_SEED={seed})")
    rng = random.Random(seed)
    url = moto.fresh_url()
    with brook.open(url, endpoint_url=moto.endpoint) as b:
        b.create_topic("crash", partitions=3)
    expected: dict[tuple[int, int], bytes] = {}
    committed: dict[str, int] = {}
    for death in range(DEATHS):
        machine = tmp_path / f"machine-{death}"
        server = Served(
            machine / "data",
            "--storage",
            url,
            "--endpoint-url",
            moto.endpoint,
            "--cache-dir",
            str(machine / "cache"),
            "--lease-ms",
            str(LEASE_MS),
        )
        position = {"0": death * 3}
        status, _ = server.request(
            "POST", "/v1/topics/crash/groups/billing/commit", {"offsets": position}
        )
        assert status == 200
        committed = position
        stop = threading.Event()
        acked: list[tuple[int, int, int, int]] = []
        producers = [
            threading.Thread(target=produce, args=(server.port, death, t, stop, acked))
            for t in range(PRODUCERS)
        ]
        for producer in producers:
            producer.start()
        time.sleep(rng.uniform(0.3, 1.0))
        server.process.kill()
        server.process.wait()
        stop.set()
        for producer in producers:
            producer.join(timeout=60)
        server.close()
        shutil.rmtree(machine)  # the disk dies with the machine
        for thread, seq, partition, offset in acked:
            expected[(partition, offset)] = value_for(death, thread, seq)

        # The dead machine's lease is still live: the new one waits it out, as serve does.
        with brook.open(
            url,
            endpoint_url=moto.endpoint,
            cache_dir=str(tmp_path / "fresh-machine"),
            wait_for_lease=True,
        ) as b:
            check_acknowledged(b, expected, f"seed {seed}, death {death}")
            assert b.consumer("crash", "billing").committed()[0] == committed["0"]
        shutil.rmtree(tmp_path / "fresh-machine")
    assert len(expected) > DEATHS * 5, (
        f"too few acks to mean anything: {len(expected)} (seed {seed})"
    )
    print(f"{DEATHS} machine deaths on S3, {len(expected)} acknowledged records verified")
