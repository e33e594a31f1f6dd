"""A failing disk on a real file system: fsync answers EIO and the unsynced pages are gone.

On Linux a failed fsync may have dropped the dirty pages it could not write
("fsyncgate"): retrying it can succeed and prove nothing. lazyfs
(tests/powerloss) fails the next fsyncs on command, dropping each file's unsynced
pages as the kernel does. Brook must answer those batches with StorageError,
never acknowledge them, keep serving exactly what it acknowledged (no hole, no
record of a failed batch, no record twice), carry on writing when fsync works
again, and lose nothing acknowledged in a power cut afterwards.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import brook
from brook.errors import StorageError
from brook.records import Record
from tests.powerloss.mount import LazyMount, lazy_mount

ROUNDS = 12


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[LazyMount]:
    with lazy_mount(tmp_path, "the failing-disk test") as mounted:
        yield mounted


def stored(b: brook.Broker, partitions: int) -> dict[tuple[int, int], bytes]:
    found: dict[tuple[int, int], bytes] = {}
    for p in range(partitions):
        records: list[brook.Record] = []
        while batch := b.topic("t").read(p, len(records), 1000):
            records.extend(batch)
        assert [r.offset for r in records] == list(range(len(records))), f"hole in {p}"
        found.update({(p, r.offset): r.value for r in records})
    return found


def test_a_failed_fsync_is_never_acknowledged(mount: LazyMount) -> None:
    seed = random.randrange(2**32)
    print(f"failing disk seed {seed}")
    rng = random.Random(seed)
    data = mount.mountpoint / "data"
    acked: dict[tuple[int, int], bytes] = {}
    refused = 0
    lock = threading.Lock()
    with brook.open(str(data)) as b:
        b.create_topic("t", partitions=2)
        t = b.topic("t")

        def produce(tag: str, count: int) -> None:
            nonlocal refused
            for i in range(count):
                value = f"{tag}-{i}-".encode() + rng.randbytes(rng.randrange(1, 5000))
                try:
                    if i % 3:
                        ack = t.append(value, key=f"k{i % 5}".encode())
                        acks = [(ack, value)]
                    else:
                        values = [value + bytes([n]) for n in range(rng.randrange(1, 20))]
                        got = t.append_many([Record(v) for v in values])
                        acks = list(zip(got, values, strict=True))
                except StorageError:
                    with lock:
                        refused += 1
                    continue
                with lock:
                    for ack, v in acks:
                        assert (ack.partition, ack.offset) not in acked, "an offset acked twice"
                        acked[(ack.partition, ack.offset)] = v

        for round_ in range(ROUNDS):
            produce(f"ok{round_}", rng.randrange(5, 30))
            mount.fail_fsyncs(rng.randint(1, 3))
            threads = [
                threading.Thread(target=produce, args=(f"r{round_}t{n}", 10))
                for n in range(rng.choice([1, 4]))
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert stored(b, 2) == acked, f"served records differ from acked (seed {seed})"
        assert refused >= ROUNDS, f"only {refused} refusals (seed {seed})"
    mount.cut()
    with brook.open(str(data)) as b:
        assert stored(b, 2) == acked, f"after a power cut (seed {seed})"
    print(f"{ROUNDS} rounds of failing fsyncs: {len(acked)} records acked, {refused} calls refused")
