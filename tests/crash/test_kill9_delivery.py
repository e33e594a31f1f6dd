"""kill -9 of `brook serve`, or a power cut, while it delivers: the endpoint is still
there and every acknowledged record still reaches the receiver (at least once),
whatever moment the broker died at."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from tests.crash.crashes import Crash
from tests.delivery.receivers import Receiver, wait_for
from tests.served import Served

KILLS = int(os.environ.get("BROOK_DELIVERY_CRASH_KILLS", "10"))


def test_every_acked_record_arrives_through_crashes(tmp_path: Path, crash: Crash) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(1 << 30)))
    print(f"seed {seed} (BROOK_SEED={seed} replays it)")
    rng = random.Random(seed)
    config = tmp_path / "brook.toml"
    config.write_text("delivery_allow_private_networks = true\n")
    data = crash.data
    cycles = crash.cycles(KILLS)
    acked: set[bytes] = set()
    with Receiver() as receiver:
        server = Served(data, config=config)
        try:
            status, _ = server.request(
                "PUT", "/v1/endpoints/hook", {"url": receiver.url, "topics": ["events"]}
            )
            assert status == 200
            for kill in range(cycles):
                for i in range(rng.randrange(20, 200)):
                    value = f"{kill}-{i}".encode()
                    status, _ = server.request("POST", "/v1/topics/events/records", value)
                    assert status == 200
                    acked.add(value)
                time.sleep(rng.random() * 0.05)  # die at any moment of the delivery
                server.close()  # SIGKILL
                crash.after_kill(rng)
                server = Served(data, config=config)
            wait_for(lambda: acked <= {g.body for g in receiver.requests()}, 120)
        finally:
            server.close()
    got = [g.body for g in receiver.requests()]
    assert acked <= set(got)
    duplicates = len(got) - len(set(got))
    print(
        f"{crash.describe(cycles)}: {len(acked)} records acked, {len(got)} deliveries, "
        f"{duplicates} duplicates"
    )
