"""The process the queue crash test kills: workers lease, ack, nack and drop
records of a queue group while a producer appends more.

Usage: python queue_worker.py DATA_DIR|URL RUN SEED THREADS

With a URL the workers and the producer go through a running `brook serve`
(which the parent kills) with the Python client.

Reports, each only after the call returned (so the parent knows it happened):
"L partition offset attempt" for a lease, "A partition offset attempt" for an
ack, "N partition offset attempt" for a nack. Dropped jobs are reported by
nothing: their leases expire, as a crashed worker's do.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from typing import Any

import brook
from brook import limits
from brook.errors import BrookError, LeaseExpired
from brook.records import Record

TOPIC = "work"
GROUP = "crashers"
PARTITIONS = 2
VISIBILITY_MS = 400
MAX_ATTEMPTS = 4
SNAPSHOT_CHANGES = 400
"""Small, so snapshots (and the deletion of status segments behind them) happen under crashes too."""

_out = threading.Lock()


def report(line: str) -> None:
    with _out:
        os.write(1, (line + "\n").encode())


def work(queue: Any, seed: int) -> None:
    rng = random.Random(seed)
    while True:
        jobs = queue.lease(max_records=rng.randint(1, 40), timeout=0.2)
        for job in jobs:
            report(f"L {job.record.partition} {job.record.offset} {job.attempt}")
        acks, nacks = [], []
        for job in jobs:
            roll = rng.random()
            if roll < 0.8:
                acks.append(job)
            elif roll < 0.95:
                nacks.append(job)
        for settle, chosen, tag in ((queue.ack, acks, "A"), (queue.nack, nacks, "N")):
            if not chosen:
                continue
            try:
                settle(chosen)
            except LeaseExpired:
                continue  # some expired while we dawdled; the rest were settled but unreported
            for job in chosen:
                report(f"{tag} {job.record.partition} {job.record.offset} {job.attempt}")


def produce(broker: Any, run: int) -> None:
    topic = broker.topic(TOPIC)
    for seq in range(1_000_000):
        topic.append_many(
            [Record(f"{run}:{seq}:{i}".encode(), key=f"k{i % 5}".encode()) for i in range(20)]
        )
        time.sleep(0.01)  # about as fast as the workers finish them, so no backlog piles up


def until_the_broker_dies(fn: Any, *args: Any) -> None:
    """Run `fn` until the broker it talks to is killed (then it gets Unavailable)."""
    try:
        fn(*args)
    except BrookError:
        return


def main() -> None:
    where, run, seed, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    limits.queue_snapshot_changes = SNAPSHOT_CHANGES
    broker: Any = brook.connect(where) if where.startswith("http") else brook.open(where)
    broker.create_topic(TOPIC, partitions=PARTITIONS)
    queue = broker.queue(
        TOPIC,
        GROUP,
        visibility_timeout_ms=VISIBILITY_MS,
        max_attempts=MAX_ATTEMPTS,
        backoff={"min_ms": 20, "max_ms": 100},
    )
    report("READY")
    workers = [
        threading.Thread(
            target=until_the_broker_dies, args=(work, queue, seed * 100 + n), daemon=True
        )
        for n in range(threads)
    ]
    for worker in workers:
        worker.start()
    until_the_broker_dies(produce, broker, run)
    time.sleep(60)  # the parent kills us


if __name__ == "__main__":
    main()
