"""Item zero with many partitions: kill -9 or a power cut while every commit round of the
write-ahead log touches many partitions never loses an acknowledged record.

A child process (many_writer.py) opens a broker on hundreds of topics and queue groups
on some of them; 32 threads append single records to topics chosen at random (so each
round's one WAL write and sync covers dozens of partitions and status logs) while workers
lease and ack. The parent kills it with SIGKILL at a random moment (for a power cut,
then drops or tears every write not fsynced: tests/crash/conftest.py), reopens the same
directory, and checks after every restart:

- every acknowledged record is at its offset with its bytes, offsets are dense from 0,
  and no record is stored twice (replay never appends what a segment already holds);
- what the restart replays (the WAL past its checkpoint) is at most `wal_bytes_max` and
  one round, and the WAL directory then holds at most `wal_bytes_max` plus one file;
- no acked queue record is leased again, and no attempt is handed out twice;

and at the end, once every lease has expired, that each group's records are all acked
or dead. Three modes (many_writer.MODES): checkpoints every 5 s (kills replay the whole
WAL), checkpoints back to back (kills land inside them), and a WAL of 256 KiB (files
roll often and rounds wait for checkpoints).

BROOK_MANY_TOPICS (80), BROOK_MANY_GROUPS (12) and BROOK_MANY_CRASH_KILLS (2; power
cuts: BROOK_POWER_CUTS) make it larger. BROOK_SEED replays a run; the seed is printed.
"""

from __future__ import annotations

import os
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
import pytest

import brook
from brook import limits
from brook.commit.committer import Committer
from brook.log.wal import recover as wal_recover
from brook.storage.local import LocalStorage
from tests.crash import child
from tests.crash.crashes import Crash
from tests.crash.many_writer import (
    MODES,
    VISIBILITY_MS,
    group_topics,
    partitions_of,
    topic_name,
)
from tests.waiting import slow

KILLS = int(os.environ.get("BROOK_MANY_CRASH_KILLS", "2"))
TOPICS = int(os.environ.get("BROOK_MANY_TOPICS", "80"))
GROUPS = int(os.environ.get("BROOK_MANY_GROUPS", "12"))
WRITER = Path(__file__).with_name("many_writer.py")
ROUND_BYTES_MAX = 64 * 1024
"""Well over what one commit round of many_writer.py writes to the WAL: a request per
thread (36), each a record of about 300 bytes or the status changes of up to 20 jobs."""

Position = tuple[str, int, int]
"""(topic or group, partition, offset)"""


@dataclass
class Reported:
    """What the children reported, over every run so far."""

    acked: dict[Position, int] = field(default_factory=dict)
    """Acknowledged records: the CRC32C of each one's value."""
    acked_jobs: dict[Position, int] = field(default_factory=dict)
    """Acked queue records: the attempt each was acked at."""
    attempts: dict[Position, list[int]] = field(default_factory=lambda: defaultdict(list))
    checkpoints: int = 0

    def take(self, lines: list[str], context: str) -> None:
        for line in lines:
            tag, *rest = line.split(" ", 1)
            assert tag != "E", f"the child failed: {line} ({context})"
            if tag == "A":
                topic, p, o, crc = rest[0].split()
                self.acked[(topic, int(p), int(o))] = int(crc)
            elif tag == "L":
                self.leased(rest[0], context)
            elif tag == "K":
                self.acked_job(rest[0], context)
            elif tag == "P":
                self.checkpoints += 1

    def acked_job(self, fields: str, context: str) -> None:
        group, p, o, attempt = fields.split()
        job, n = (group, int(p), int(o)), int(attempt)
        assert max(self.attempts[job], default=n) <= n, (
            f"{job} acked at attempt {n}, but attempt {max(self.attempts[job])} was leased "
            f"({context})"
        )
        self.acked_jobs[job] = n

    def leased(self, fields: str, context: str) -> None:
        group, p, o, attempt = fields.split()
        job, n = (group, int(p), int(o)), int(attempt)
        assert n <= self.acked_jobs.get(job, n), (
            f"{job} leased again at attempt {n} after its ack ({context})"
        )
        assert n not in self.attempts[job], f"{job} attempt {n} handed out twice ({context})"
        self.attempts[job].append(n)


def run_and_kill(data: Path, run: int, seed: int, mode: str, delay_s: float) -> list[str]:
    args = [str(data), str(run), str(seed), str(TOPICS), str(GROUPS), mode]
    return child.run_and_kill(WRITER, args, delay_s)


def cut_power(crash: Crash, rng: random.Random, run: int) -> None:
    """For a power cut, drop and tear unsynced writes in turn (so any two cuts see both)."""
    if crash.mount is None:
        return
    torn = run % 2 == 1
    crash.torn += torn
    crash.mount.cut(rng.randrange(2**32) if torn else None)


def check_replay_bound(data: Path, wal_bytes_max: int, context: str) -> int:
    """What a restart replays (the WAL past its checkpoint) is at most `wal_bytes_max` and
    one round: the round that finds the WAL past the bound waits for a checkpoint.
    Returns how much that is."""
    storage = LocalStorage(data)
    try:
        found = wal_recover(storage)
    finally:
        storage.close()
    assert found.end - found.checkpoint <= wal_bytes_max + ROUND_BYTES_MAX, (
        f"the WAL holds {found.end - found.checkpoint} bytes past its checkpoint, over "
        f"{wal_bytes_max} and a round ({context})"
    )
    return found.end - found.checkpoint


def check_wal_files(data: Path, wal_bytes_max: int, context: str) -> None:
    """The WAL directory takes at most `wal_bytes_max` plus one file of disk (a file is
    rolled once it passes its size, by less than a round)."""
    file_bytes_max = min(limits.wal_file_bytes_max, wal_bytes_max // 4)  # as Core sets it
    sizes = [f.stat().st_size for f in (data / "wal").glob("*.wal")]
    assert sum(sizes) <= wal_bytes_max + file_bytes_max + ROUND_BYTES_MAX, (
        f"the WAL takes {sum(sizes)} bytes in files of {sizes}, over {wal_bytes_max} and "
        f"one file of {file_bytes_max} ({context})"
    )


def read_partition(b: brook.Broker, topic: str, partition: int) -> list[brook.Record]:
    records: list[brook.Record] = []
    while got := b.topic(topic).read(partition, len(records), 5000):
        records.extend(got)
    return records


def check_records(b: brook.Broker, acked: dict[Position, int], context: str) -> None:
    """Every acknowledged record at its offset with its bytes; offsets dense; none twice."""
    stored: dict[tuple[str, int], list[brook.Record]] = {}
    for i in range(TOPICS):
        topic = topic_name(i)
        assert b.core.has_topic(topic), f"{topic} is gone ({context})"
        ends = b.topic(topic).end_offsets()
        for p in range(partitions_of(i)):
            records = stored[(topic, p)] = read_partition(b, topic, p)
            assert [r.offset for r in records] == list(range(ends[p])), (
                f"{topic}/{p}: offsets not dense to {ends[p]} ({context})"
            )
    for (topic, p, offset), crc in acked.items():
        records = stored[(topic, p)]
        assert offset < len(records), f"acknowledged {topic}/{p}/{offset} is missing ({context})"
        assert crc32c.crc32c(records[offset].value) == crc, (
            f"{topic}/{p}/{offset} changed ({context})"
        )
    writes = [r.value.split(b":", 3)[:3] for rs in stored.values() for r in rs]
    assert len({tuple(w) for w in writes}) == len(writes), f"a record stored twice ({context})"


def check_groups_drain(b: brook.Broker, reported: Reported, context: str) -> None:
    """Once every lease has expired, leasing each group to its end never hands out an
    acked record, and leaves every record acked or dead."""
    for group, topic in group_topics(TOPICS, GROUPS).items():
        q = b.queue(topic, group)
        while jobs := q.lease(max_records=1000, timeout=0, visibility_timeout_ms=60_000):
            for job in jobs:
                position = (group, job.record.partition, job.record.offset)
                assert position not in reported.acked_jobs, (
                    f"acked {position} came back ({context})"
                )
            q.ack(jobs)
        stats = q.stats()
        total = sum(b.topic(topic).end_offsets().values())
        assert stats["acked"] + stats["dead"] == total, (
            f"{group}: {stats}, {total} records ({context})"
        )


def restart_and_check(
    crash: Crash, mode: str, reported: Reported, context: str, drain_after: float | None
) -> None:
    """Open the directory the child left and check it (see the module); with
    `drain_after` (when the killed workers' leases have all expired), drain the groups."""
    wal_bytes_max = MODES[mode].wal_bytes_max
    with brook.open(str(crash.data), wal_bytes_max=wal_bytes_max) as b:
        check_wal_files(crash.data, wal_bytes_max, context)
        check_records(b, reported.acked, context)
        if drain_after is not None:
            time.sleep(max(0.0, drain_after - time.monotonic()))
            check_groups_drain(b, reported, context)


@pytest.mark.crash
@pytest.mark.parametrize("mode", list(MODES))
def test_many_partitions_survive_crashes(crash: Crash, mode: str) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"many-partitions crash test seed: {seed} (replay with BROOK_SEED={seed})")
    rng = random.Random(seed)
    cycles = crash.cycles(KILLS)
    reported = Reported()
    replayed = 0
    for run in range(cycles):
        life_s = rng.uniform(0.1, 0.6)
        if run == cycles - 1 and MODES[mode].checkpoint_loop and not reported.checkpoints:
            life_s = slow(3.0)  # on a busy machine every short life ended before one
        lines = run_and_kill(crash.data, run, seed, mode, life_s)
        leases_expired = time.monotonic() + VISIBILITY_MS / 1000
        cut_power(crash, rng, run)
        context = f"seed {seed}, {mode}, run {run}"
        reported.take(lines, context)
        pending = check_replay_bound(crash.data, MODES[mode].wal_bytes_max, context)
        replayed = max(replayed, pending)
        last = run == cycles - 1
        restart_and_check(crash, mode, reported, context, leases_expired if last else None)
    assert len(reported.acked) > cycles * 10, f"too few acks: {len(reported.acked)} ({seed})"
    assert reported.acked_jobs, f"no queue record was acked (seed {seed})"
    assert reported.checkpoints or not MODES[mode].checkpoint_loop, f"no checkpoint ({seed})"
    print(
        f"{crash.describe(cycles)}, {TOPICS} topics, {len(reported.acked)} acknowledged "
        f"records and {len(reported.acked_jobs)} queue acks verified, "
        f"{reported.checkpoints} checkpoints in the loop, at most {replayed} WAL bytes replayed"
    )


def test_the_wal_on_disk_stays_within_its_bound(tmp_path: Path) -> None:
    """The WAL takes at most `wal_bytes_max` plus one file of disk, even when checkpoints
    lag behind (here: held off) and rounds fill it up to its bound."""
    wal_bytes_max = 256 * 1024
    with brook.open(str(tmp_path), wal_bytes_max=wal_bytes_max) as b:
        committer = b.core.committer
        assert isinstance(committer, Committer) and committer.wal is not None
        assert committer.checkpointer is not None
        with committer.checkpointer._mutex:  # a checkpoint that has not finished
            # Rounds of about 20 KB, up to the bound (one past it would wait for the mutex).
            while committer.wal.bytes_since_checkpoint < wal_bytes_max - 25_000:
                b.topic("t").append_many([brook.Record(b"x" * 1000)] * 19)
            check_wal_files(tmp_path, wal_bytes_max, "checkpoints held off")
