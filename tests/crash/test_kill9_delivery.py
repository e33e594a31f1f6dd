"""kill -9 of `brook serve`, or a power cut, while it delivers: the endpoint is still
there and every acknowledged record still reaches the receiver (at least once),
whatever moment the broker died at."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from tests.crash.crashes import Crash
from tests.delivery.receivers import Answer, Got, Receiver, wait_for
from tests.served import Served

KILLS = int(os.environ.get("BROOK_DELIVERY_CRASH_KILLS", "5"))


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


def test_an_attempt_cut_short_by_the_broker_is_not_spent(tmp_path: Path) -> None:
    """A record in flight each time the broker is killed is sent again after each start
    with its attempt given back: three kills do not make it dead at max_attempts 2."""
    config = tmp_path / "brook.toml"
    config.write_text("delivery_allow_private_networks = true\n")
    hanging = [True]

    def answer(got: Got) -> Answer:
        return Answer(delay_s=10.0) if hanging[0] else Answer()

    with Receiver(answer) as receiver:
        server = Served(tmp_path / "data", config=config)
        try:
            settings = {
                "url": receiver.url,
                "topics": ["events"],
                "max_attempts": 2,
                "timeout_ms": 60_000,
            }
            assert server.request("PUT", "/v1/endpoints/hook", settings)[0] == 200
            assert server.request("POST", "/v1/topics/events/records", b"in flight")[0] == 200
            for kill in range(3):
                wait_for(lambda k=kill: len(receiver.requests()) > k, 30)  # this life's attempt
                hanging[0] = kill < 2  # the fourth life's attempt is answered
                server.close()  # SIGKILL mid-attempt
                server = Served(tmp_path / "data", config=config)
            wait_for(lambda: len(receiver.requests()) >= 4, 30)
            wait_for(lambda: server.request("GET", "/v1/endpoints/hook/stats")[1]["acked"] == 1)
            stats = server.request("GET", "/v1/endpoints/hook/stats")[1]
            assert stats["dead"] == 0, stats
            attempts = [g.headers["brook-attempt"] for g in receiver.requests()]
            assert attempts == ["1", "1", "1", "1"], f"attempts sent: {attempts}"
        finally:
            server.close()
