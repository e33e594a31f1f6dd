"""The process the many-partitions crash test kills: 32 threads append single records to
topics chosen at random among hundreds, so every commit round of the write-ahead log
touches many partitions, while workers lease and ack in queue groups on some of them
(their status logs share the rounds) and, in some modes, a thread checkpoints in a loop.

Usage: python many_writer.py DATA_DIR RUN SEED TOPICS GROUPS MODE

Reports, each only after the call returned (so the parent knows it happened):
"A topic partition offset crc" for an acknowledged append (crc: CRC32C of the value),
"L group partition offset attempt" for a lease, "K group partition offset attempt"
for an ack, "P" for a checkpoint that completed, and "E thread error" for a call that
failed (the parent fails on it: nothing here should ever fail). Values begin with
"run:thread:seq:", unique, so the parent can tell a record stored twice.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

import crc32c

import brook
from brook import limits
from brook.errors import LeaseExpired

APPENDERS = 32
WORKERS = 4
VISIBILITY_MS = 500
MAX_ATTEMPTS = 5
SNAPSHOT_CHANGES = 200
"""Small, so queue snapshots (and the status segments deleted behind them) happen too."""


class Mode(NamedTuple):
    """How the broker is opened, and whether a thread checkpoints in a loop."""

    wal_bytes_max: int
    checkpoint_interval_ms: int
    checkpoint_loop: bool


MODES = {
    # Checkpoints every 5 s: a kill within the first seconds replays the whole WAL.
    "wal": Mode(limits.wal_bytes_max_default, limits.checkpoint_interval_ms_default, False),
    # Checkpoints back to back: kills land inside them.
    "checkpointing": Mode(limits.wal_bytes_max_default, 10, True),
    # A WAL of 256 KiB (files of 64 KiB): files roll often, rounds wait for checkpoints.
    "small-wal": Mode(256 * 1024, limits.checkpoint_interval_ms_default, False),
}


def topic_name(i: int) -> str:
    return f"many-{i:05d}"


def partitions_of(i: int) -> int:
    return 3 if i % 4 == 0 else 1


def group_topics(topics: int, groups: int) -> dict[str, str]:
    """The queue groups, by name, and the topic each works on (spread over the topics)."""
    return {f"g{g:03d}": topic_name(g * topics // groups) for g in range(groups)}


def value_for(run: int, thread: int, seq: int, rng: random.Random) -> bytes:
    return f"{run}:{thread}:{seq}:".encode() + rng.randbytes(rng.randrange(0, 300))


_out = threading.Lock()


def report(lines: list[str]) -> None:
    if lines:
        with _out:
            os.write(1, ("\n".join(lines) + "\n").encode())


def append(b: brook.Broker, run: int, thread: int, seed: int, topics: int) -> None:
    rng = random.Random(f"{seed}:{run}:{thread}")
    handles = [b.topic(topic_name(i)) for i in range(topics)]
    for seq in range(10**9):
        i = rng.randrange(topics)
        value = value_for(run, thread, seq, rng)
        ack = handles[i].append(value)
        report([f"A {topic_name(i)} {ack.partition} {ack.offset} {crc32c.crc32c(value)}"])


def work(queues: dict[str, Any], seed: str) -> None:
    """Lease from groups at random; ack most jobs, drop the rest (their leases expire)."""
    rng = random.Random(seed)
    names = sorted(queues)
    while True:
        group = rng.choice(names)
        jobs = queues[group].lease(max_records=rng.randint(1, 20), timeout=0.02)
        report([f"L {group} {j.record.partition} {j.record.offset} {j.attempt}" for j in jobs])
        acks = [job for job in jobs if rng.random() < 0.85]
        if not acks:
            continue
        try:
            queues[group].ack(acks)
        except LeaseExpired:
            continue  # some expired meanwhile; the rest were acked, unreported
        report([f"K {group} {j.record.partition} {j.record.offset} {j.attempt}" for j in acks])


def checkpoint(b: brook.Broker) -> None:
    """Checkpoint after every commit round: one is nearly always under way."""
    while True:
        with b.core.appended:
            b.core.appended.wait(0.1)
        b.core.checkpoint()
        report(["P"])


def reporting_failures(name: str, fn: Callable[..., None], *args: Any) -> threading.Thread:
    """A thread running `fn`; if it raises, "E name error" tells the parent."""

    def run() -> None:
        try:
            fn(*args)
        except BaseException as exc:
            report([f"E {name} {exc!r}".replace("\n", " ")])
            traceback.print_exc()

    return threading.Thread(target=run, name=name, daemon=True)


def main() -> None:
    data, run, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    topics, groups, mode = int(sys.argv[4]), int(sys.argv[5]), MODES[sys.argv[6]]
    limits.queue_snapshot_changes = SNAPSHOT_CHANGES
    b = brook.open(
        data,
        wal_bytes_max=mode.wal_bytes_max,
        checkpoint_interval_ms=mode.checkpoint_interval_ms,
    )
    for i in range(topics):
        b.create_topic(topic_name(i), partitions=partitions_of(i))
    queues = {
        group: b.queue(topic, group, visibility_timeout_ms=VISIBILITY_MS, max_attempts=MAX_ATTEMPTS)
        for group, topic in group_topics(topics, groups).items()
    }
    threads = [
        reporting_failures(f"append-{t}", append, b, run, t, seed, topics) for t in range(APPENDERS)
    ]
    threads += [
        reporting_failures(f"work-{w}", work, queues, f"{seed}:{run}:work-{w}")
        for w in range(WORKERS)
    ]
    if mode.checkpoint_loop:
        threads.append(reporting_failures("checkpoint", checkpoint, b))
    report(["READY"])
    for thread in threads:
        thread.start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
