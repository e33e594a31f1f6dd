"""Item zero: kill -9 or a power cut at random moments never loses an acknowledged record.

A child process appends from several threads and reports each ack over a
pipe; the parent kills it with SIGKILL at a random moment (and, for a power
cut, drops or tears every write not fsynced: tests/crash/conftest.py), then
opens the same directory and checks: every acknowledged record is there with
identical bytes, offsets are dense from 0, every record the child had read is
still there, and the consumer group's position is at least its last commit.
Set BROOK_SEED to replay a run; the seed is printed on every run.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import crc32c
import pytest

import brook
from tests.crash import child
from tests.crash.crashes import Crash
from tests.crash.producer import PARTITIONS, TOPIC, value_for

KILLS = int(os.environ.get("BROOK_CRASH_KILLS", "8"))
PRODUCER = Path(__file__).with_name("producer.py")


def run_and_kill(data: Path, run: int, seed: int, delay_s: float, threads: int) -> list[str]:
    return child.run_and_kill(PRODUCER, [str(data), str(run), str(seed), str(threads)], delay_s)


def read_partition(b: brook.Broker, partition: int) -> list[brook.Record]:
    records: list[brook.Record] = []
    while True:
        got = b.topic(TOPIC).read(partition, len(records), 5000)
        if not got:
            return records
        records.extend(got)


@pytest.mark.crash
def test_acknowledged_records_survive_a_crash(crash: Crash) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"crash test seed: {seed} (replay with BROOK_SEED={seed})")
    rng = random.Random(seed)
    data = crash.data
    cycles = crash.cycles(KILLS)
    acked: dict[tuple[int, int], tuple[int, int, int]] = {}
    seen: dict[tuple[int, int], int] = {}
    committed: dict[int, int] = {}
    for run in range(cycles):
        # One producer thread exercises the caller-runs path; several, the writer/syncer pipeline.
        lines = run_and_kill(data, run, seed + run, rng.uniform(0.05, 0.6), rng.choice([1, 2, 6]))
        crash.after_kill(rng)
        for line in lines:
            if line.startswith("A "):
                _, r, thread, seq, partition, offset = line.split()
                acked[(int(partition), int(offset))] = (int(r), int(thread), int(seq))
            elif line.startswith("R "):
                _, partition, offset, crc = line.split()
                seen[(int(partition), int(offset))] = int(crc)
            elif line.startswith("C "):
                _, partition, position = line.split()
                committed[int(partition)] = max(committed.get(int(partition), 0), int(position))
        with brook.open(str(data)) as b:
            if not b.core.has_topic(TOPIC):  # lost whole: said by the checks below
                b.create_topic(TOPIC, partitions=PARTITIONS)
            stored = {p: read_partition(b, p) for p in range(PARTITIONS)}
            ends = b.topic(TOPIC).end_offsets()
            lag = b.consumer(TOPIC, "crash-readers").lag()
        context = f"seed {seed}, run {run}"
        for p, records in stored.items():
            assert [r.offset for r in records] == list(range(len(records))), (
                f"offsets not dense ({context})"
            )
            assert ends[p] == len(records), context
            assert 0 <= lag[p] <= ends[p], context
            assert ends[p] - lag[p] >= committed.get(p, 0), (
                f"group position {ends[p] - lag[p]} on {p} is behind its commit to "
                f"{committed[p]} ({context})"
            )
        for (p, offset), (r, thread, seq) in acked.items():
            assert offset < len(stored[p]), f"acknowledged {p}/{offset} is missing ({context})"
            assert stored[p][offset].value == value_for(r, thread, seq), (
                f"{p}/{offset} changed ({context})"
            )
        for (p, offset), crc in seen.items():
            assert offset < len(stored[p]), f"{p}/{offset} was read, then vanished ({context})"
            assert crc32c.crc32c(stored[p][offset].value) == crc, (
                f"{p}/{offset} was read, then changed ({context})"
            )
    assert len(acked) > cycles * 10, f"too few acks to mean anything: {len(acked)} (seed {seed})"
    print(
        f"{crash.describe(cycles)}, {len(acked)} acknowledged records verified, {len(seen)} read records verified"
    )
