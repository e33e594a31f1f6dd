"""Item zero at the HTTP edge: kill -9 of `brook serve` never loses a record answered 200.

Several threads POST records over keep-alive connections and note every ack; the
server is killed with SIGKILL at a random moment, restarted on the same
directory, and every acknowledged record must be there with identical bytes.
Set BROOK_SEED to replay a run; the seed is printed on every run.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import random
import threading
import time

import pytest

import brook
from tests.crash.crashes import Crash
from tests.served import Served

KILLS = int(os.environ.get("BROOK_SERVER_CRASH_KILLS", "5"))
PRODUCERS = 4


def value_for(run: int, thread: int, seq: int) -> bytes:
    rng = random.Random(f"{run}/{thread}/{seq}")
    return f"{run}/{thread}/{seq}/".encode() + rng.randbytes(rng.randrange(0, 2000))


def produce(
    port: int, run: int, thread: int, stop: threading.Event, acked: list[tuple[int, int, int, int]]
) -> None:
    """POST batches until the server dies; note (thread, seq, partition, offset) of every 200."""
    rng = random.Random(run * 100 + thread)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        _produce(connection, rng, run, thread, stop, acked)
    finally:
        connection.close()


def _produce(
    connection: http.client.HTTPConnection,
    rng: random.Random,
    run: int,
    thread: int,
    stop: threading.Event,
    acked: list[tuple[int, int, int, int]],
) -> None:
    seq = 0
    while not stop.is_set():
        count = rng.randrange(1, 20)
        batch = [
            {
                "value_b64": base64.b64encode(value_for(run, thread, seq + i)).decode(),
                "key": f"k{(seq + i) % 7}",
            }
            for i in range(count)
        ]
        try:
            connection.request(
                "POST",
                "/v1/topics/crash/records",
                json.dumps({"records": batch}),
                {"content-type": "application/json"},
            )
            response = connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException):
            return  # the server died: this batch was not acknowledged
        assert response.status == 200, body
        for i, ack in enumerate(json.loads(body)["acks"]):
            acked.append((thread, seq + i, ack["partition"], ack["offset"]))
        seq += count


def check_acknowledged(
    b: brook.Broker, expected: dict[tuple[int, int], bytes], context: str, partitions: int = 3
) -> None:
    """Every acknowledged record of topic "crash" is there, byte for byte, at its
    offset, and the offsets of every partition are dense."""
    topic = b.topic("crash")
    for partition in range(partitions):
        stored = []
        while batch := topic.read(partition, len(stored), 5000):
            stored.extend(batch)
        assert [r.offset for r in stored] == list(range(len(stored))), (
            f"offsets not dense ({context})"
        )
        for (p, offset), value in expected.items():
            if p == partition:
                assert offset < len(stored), f"acknowledged {p}/{offset} lost ({context})"
                assert stored[offset].value == value, f"{p}/{offset} changed ({context})"


@pytest.mark.crash
def test_records_answered_200_survive_a_crash_of_the_server(crash: Crash) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"server crash test seed: {seed} (replay with BROOK_SEED={seed})")
    rng = random.Random(seed)
    data = crash.data
    cycles = crash.cycles(KILLS)
    expected: dict[tuple[int, int], bytes] = {}
    with brook.open(str(data)) as b:
        b.create_topic("crash", partitions=3)
    for run in range(cycles):
        server = Served(data)
        stop = threading.Event()
        acked: list[tuple[int, int, int, int]] = []
        producers = [
            threading.Thread(target=produce, args=(server.port, run, t, stop, acked))
            for t in range(PRODUCERS)
        ]
        for producer in producers:
            producer.start()
        time.sleep(rng.uniform(0.1, 0.6))
        server.process.kill()
        server.process.wait()
        stop.set()
        for producer in producers:
            producer.join(timeout=30)
        server.close()
        crash.after_kill(rng)
        for thread, seq, partition, offset in acked:
            expected[(partition, offset)] = value_for(run, thread, seq)
        with brook.open(str(data)) as b:
            check_acknowledged(b, expected, f"seed {seed}, run {run}")
    assert len(expected) > cycles * 5, (
        f"too few acks to mean anything: {len(expected)} (seed {seed})"
    )
    print(f"{crash.describe(cycles)} of brook serve, {len(expected)} acknowledged records verified")
