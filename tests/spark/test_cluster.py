"""The sink on a real cluster: Spark's local-cluster mode (two executor JVMs), a
shuffle before the sink, and kill -9 of the driver, an executor and the broker.

After a shuffle, a task's rows come in a different order on every attempt (on
one machine in local[N] they happen not to), so this is where a sink that
names rows by their position loses and duplicates them. The output must equal
the input exactly, as a multiset: duplicate input rows each written once.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import brook
from brook.records import Record
from tests.api.test_staging import everything
from tests.environment import unmeasured
from tests.served import Served
from tests.waiting import slow

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
SCRIPT = Path(__file__).with_name("cluster_jobs.py")
WAIT_S = 240
DRIVER_KILLS = int(os.environ.get("BROOK_SPARK_DRIVER_KILLS", "1"))
"""Drivers killed mid-write before the last run drains (1 in make test, each start of a
cluster costing half a minute; 10 in make reliability)."""
PER_TRIGGER = int(os.environ.get("BROOK_SPARK_ROWS_PER_TRIGGER", "1500"))
"""Rows per micro-batch (1,500 in make test; 10,000 in make reliability): every row is
shuffled, staged and published, and the test's cost on two cores grows with them."""
ROWS = PER_TRIGGER * (5 + 2 * DRIVER_KILLS)
"""Enough micro-batches for every kill to come in the middle of one."""
SOURCE_APPEND_ROWS = 250
"""The source's rows are appended this many at a time (a batch each)."""


def source_rows() -> list[Record]:
    """Every value twice (identical rows), a few keys, some rows with no key."""
    return [
        Record(b"row-%d" % (i // 2), key=None if i % 11 == 0 else b"k%d" % (i % 13))
        for i in range(ROWS)
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Driver:
    """cluster_jobs.py in a process group of its own (its JVM and executors with it)."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(SCRIPT), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**unmeasured(), "PYTHONPATH": f"{ROOT}/src"},
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.decode().strip())
        self.lines.put("EXITED")

    def expect(self, word: str) -> None:
        line = self.lines.get(timeout=WAIT_S)
        assert line == word, f"expected {word}, got {line!r}"

    def executors(self) -> list[int]:
        """Pids of this driver's executor JVMs."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            group = int(stat.rsplit(")", 1)[1].split()[2])
            if group == self.process.pid and b"CoarseGrainedExecutorBackend" in cmdline:
                found.append(int(entry.name))
        return found

    def kill(self) -> None:
        """kill -9 of the driver, its JVM and its executors at once."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._reader.join(timeout=10)  # its output ends with the group
        if self.process.stdout is not None:
            self.process.stdout.close()


def commits(work: Path) -> int:
    folder = work / "checkpoint" / "commits"
    return len([p for p in folder.glob("*") if p.name.isdigit()]) if folder.exists() else 0


def wait_for_commit(work: Path, after: int) -> int:
    deadline = time.monotonic() + slow(WAIT_S)
    while (done := commits(work)) <= after:
        assert time.monotonic() < deadline, "the stream made no progress"
        time.sleep(0.02)
    return done


def stored(sink: Path) -> tuple[int, int]:
    """Files and bytes in the sink's directory: they change once a sink task writes."""
    files = [p for p in sink.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files if p.exists())


def wait_for_writing(sink: Path, work: Path, after: int, rng: random.Random) -> int:
    """Wait for a micro-batch after the `after`th to commit, then for the next one's
    tasks to start writing, and a moment more: the moment to kill something."""
    done = wait_for_commit(work, after)
    before = stored(sink)
    deadline = time.monotonic() + slow(WAIT_S)
    while stored(sink) == before:
        assert time.monotonic() < deadline, "the sink wrote nothing"
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 0.4))
    return done


@pytest.mark.timeout(1200)  # 114 s alone; over 300 s beside the rest on a busy machine
def test_the_sink_is_exactly_once_through_kills_on_a_cluster(tmp_path: Path) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    source, sink, work = tmp_path / "source", tmp_path / "sink", tmp_path / "work"
    work.mkdir()
    with brook.open(str(source)) as b:
        b.create_topic("in", partitions=2)
        rows = source_rows()
        # Small appends: a task reads whole batches, so with the job's maxBytesPerTask
        # a micro-batch is read by several map tasks per partition.
        for start in range(0, ROWS, SOURCE_APPEND_ROWS):
            b.topic("in").append_many(rows[start : start + SOURCE_APPEND_ROWS])
    expected = Counter((r.key, r.value) for r in rows)
    with brook.open(str(sink)) as b:
        b.create_topic("out", partitions=3)
        b.create_topic("batch-out", partitions=3)
    port = free_port()
    server = Served(sink, "--port", str(port))
    url = f"http://127.0.0.1:{port}"
    args = [str(source), url, str(work), str(PER_TRIGGER)]
    drivers: list[Driver] = []
    try:
        # 1. A batch write whose first task attempt fails half-way; then a stream
        #    whose driver is killed in the middle of a micro-batch.
        drivers.append(driver := Driver(*args, "--batch"))
        driver.expect("WROTE")
        driver.expect("READY")
        seen = wait_for_writing(sink, work, 0, rng)
        driver.kill()
        assert (work / "failed-once").exists(), "the injected task failure never happened"
        # 2. An executor killed, then the broker; then the driver again, as often as asked.
        drivers.append(driver := Driver(*args))
        driver.expect("READY")
        seen = wait_for_writing(sink, work, seen, rng)
        executors = driver.executors()
        assert executors, "no executor JVM found"
        os.kill(rng.choice(executors), signal.SIGKILL)
        seen = wait_for_writing(sink, work, seen, rng)
        server.process.send_signal(signal.SIGKILL)
        server.close()
        time.sleep(2.0)
        server = Served(sink, "--port", str(port))
        for _ in range(DRIVER_KILLS - 1):
            seen = wait_for_writing(sink, work, seen, rng)
            driver.kill()
            drivers.append(driver := Driver(*args))
            driver.expect("READY")
        # 3. Restarted from its checkpoint (or not killed again), the stream drains the source.
        driver.expect("DONE")
        driver.process.wait(WAIT_S)
    finally:
        for each in drivers:
            each.kill()
        server.close()
    with brook.open(str(sink)) as b:
        for topic in ("batch-out", "out"):
            got = Counter((r.key, r.value) for r in everything(b.topic(topic), 3))
            missing, extra = expected - got, got - expected
            assert not missing and not extra, (
                f"{topic}: {sum(missing.values())} rows missing, {sum(extra.values())} written twice"
            )
