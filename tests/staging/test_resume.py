"""A publish interrupted at any moment (kill -9, a failing disk) is finished exactly once.

The publisher is killed while it copies; the next open finishes the publish by
itself, and a replayed publish appends nothing more: the topic then holds the
staged rows exactly, duplicates in the input included.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import msgspec

import brook
from brook import layout, limits
from brook.records import Record
from brook.storage.faulty import FaultyStorage
from brook.storage.local import LocalStorage
from tests.api.test_staging import everything
from tests.environment import unmeasured
from tests.waiting import slow

PARTITIONS = 3
KILLS = int(os.environ.get("BROOK_PUBLISH_KILLS", "4"))
CHILD = Path(__file__).with_name("publisher.py")
ROOT = str(Path(__file__).parents[2])


def staged_rows(chunks: int, per_chunk: int) -> list[list[Record]]:
    """Chunks of rows with repeats across and within chunks, keyed and not."""
    return [
        [
            Record(b"row-%d" % ((c * per_chunk + i) // 2), key=b"%d" % (i % 7) if i % 4 else None)
            for i in range(per_chunk)
        ]
        for c in range(chunks)
    ]


def expected(chunks: int, per_chunk: int) -> Counter[bytes]:
    return Counter(r.value for chunk in staged_rows(chunks, per_chunk) for r in chunk)


def phase(data: Path, writer: str) -> str | None:
    path = data / layout.staging_state("out", writer)
    if not path.exists():
        return None
    return str(msgspec.json.decode(path.read_bytes())["phase"])


def test_a_publish_killed_mid_copy_is_finished_once(tmp_path: Path) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    chunks, per_chunk = 60, 2000
    interrupted = 0
    for run in range(KILLS):
        data = tmp_path / f"run{run}"
        child = subprocess.Popen(
            [sys.executable, str(CHILD), str(data), "w", "0", str(chunks), str(per_chunk)],
            stdout=subprocess.PIPE,
            env={**unmeasured(), "PYTHONPATH": f"{ROOT}/src:{ROOT}"},
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == b"READY\n"
            # Kill once the copy has begun, a random moment into it (a copy here takes
            # about 0.2 s): a kill drawn from a wider window lands after the end too often.
            deadline = time.monotonic() + slow(10)
            while phase(data, "w") is None and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(rng.uniform(0.0, 0.1))
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
            if child.stdout is not None:
                child.stdout.close()
        interrupted += phase(data, "w") == "publishing"
        with brook.open(str(data)) as b:
            t = b.topic("out")
            deadline = time.monotonic() + slow(30)
            while phase(data, "w") != "done":  # the broker finishes it by itself
                assert time.monotonic() < deadline, "the interrupted publish was not resumed"
                time.sleep(0.05)
            replay = t.publish("w", 0, {"other-part": 1})
            assert replay.replayed and replay.records == chunks * per_chunk
            got = Counter(r.value for r in everything(t, PARTITIONS))
            assert got == expected(chunks, per_chunk), f"run {run}: not exactly once"
        assert not list((data / "staging/out/w").glob("0/*")), "staged chunks left behind"
    assert interrupted >= KILLS // 3, "too few kills landed while the publish was copying"


def test_a_publish_that_failed_on_the_disk_resumes_exactly(tmp_path: Path) -> None:
    storage = FaultyStorage(LocalStorage(tmp_path / "data"))
    with brook.Broker(storage, linger_ms=0) as b:
        b.create_topic("out", partitions=PARTITIONS)
        t = b.topic("out")
        staged = staged_rows(20, 500)
        for chunk, records in enumerate(staged):
            t.stage("w", 4, "part", chunk, records)
        storage.faults.sync_failures = 3
        failures = 0
        while True:
            try:
                published = t.publish("w", 4, {"part": 20})
                break
            except brook.errors.StorageError:
                failures += 1
        assert failures >= 1 and published.replayed and published.records == 10_000
        assert Counter(r.value for r in everything(t, PARTITIONS)) == expected(20, 500)


def test_staging_no_publish_claims_is_dropped_after_the_ttl(tmp_path: Path) -> None:
    now = [1_000_000.0]
    with brook.open(str(tmp_path / "data"), clock=lambda: now[0]) as b:
        t = b.topic("out")
        t.stage("failed-job", 0, "part", 0, [Record(b"x")])
        t.stage("done-job", 0, "part", 0, [Record(b"y")])
        t.publish("done-job", 0, {"part": 1})
        b.staging.sweep()
        assert t.publish("failed-job", 0, {"part": 1}).records == 1  # kept within the TTL
        t.stage("failed-job", 1, "part", 0, [Record(b"z")])
        b.staging.sweep()
        now[0] += limits.staging_ttl_ms_default / 1000 + 1
        b.staging.sweep()
        assert not (tmp_path / "data" / "staging/out/failed-job").exists()
        assert not (tmp_path / "data" / "staging/out/done-job").exists()
        assert t.stage("done-job", 0, "part", 0, [Record(b"y")])  # forgotten after the TTL


def test_a_read_only_broker_stages_and_publishes_nothing(tmp_path: Path) -> None:
    with brook.open(str(tmp_path / "data")) as owner:
        owner.topic("out").stage("w", 0, "p", 0, [Record(b"x")])
        with brook.open(str(tmp_path / "data"), read_only=True) as reader:
            t = reader.topic("out")
            for call in (
                lambda: t.stage("w", 0, "p", 0, [Record(b"x")]),
                lambda: t.publish("w", 0, {"p": 1}),
                lambda: t.drop_staged("w", 0),
            ):
                try:
                    call()
                    raise AssertionError("a read-only broker wrote")
                except brook.errors.ReadOnly:
                    pass
        assert owner.topic("out").publish("w", 0, {"p": 1}).records == 1
