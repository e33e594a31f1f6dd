"""A real full disk under `brook serve`: a small tmpfs mounted for the test.

The server is filled until its writes fail with ENOSPC. Then: every write is
answered 503 (StorageError) and nothing more is acknowledged; reads, the
consumer group and the queue keep answering from what is on disk; once space
returns, writes succeed again without a restart; after a kill -9 and a restart
on the same directory, every record answered 200 is there, byte for byte, and
nothing answered 503 is. The directory is never left unreadable.

tmpfs needs `mount`, which needs root (CAP_SYS_ADMIN); the test says so if it
cannot mount rather than passing without a disk. The same behaviour without a
real file system (a full disk injected into the storage port) is
tests/log/test_faults.py.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import brook
from brook.errors import StorageError
from tests.served import Served

SIZE = 8 * 1024 * 1024
RECORD = 16 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    assert mounted.returncode == 0, (
        f"the full-disk test mounts a small tmpfs and cannot here: {mounted.stderr.strip()} "
        "(it needs root; tests/log/test_faults.py injects a full disk without one)"
    )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def value(seed: int, i: int) -> bytes:
    return random.Random(f"{seed}:{i}").randbytes(RECORD)


def test_a_full_disk_refuses_writes_keeps_reads_and_recovers(small_disk: Path) -> None:
    seed = random.randrange(2**32)
    print(f"full disk seed {seed}")
    data = small_disk / "data"
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * (2 * 1024 * 1024))  # freed later: "space returns"
    acked: dict[int, bytes] = {}
    refused = 0
    server = Served(data)
    try:
        assert server.request("PUT", "/v1/topics/t", {"partitions": 1})[0] == 200
        status, _ = server.request("PUT", "/v1/topics/t/queues/work", {})
        assert status == 200
        for i in range(10_000):
            status, body = server.request("POST", "/v1/topics/t/records", value(seed, i))
            if status == 200:
                acked[body["acks"][0]["offset"]] = value(seed, i)
                continue
            assert status == 503, (status, body)
            assert body["error"]["code"] == "storage_error", body
            assert "ENOSPC" in body["error"]["message"] or "space" in body["error"]["message"]
            refused += 1
            if refused == 5:
                break
        assert refused == 5, "the disk never filled"
        assert len(acked) > 100, f"only {len(acked)} records fit"

        # Full: a record that does not fit is refused again; reads keep working.
        status, _ = server.request("POST", "/v1/topics/t/records", value(seed, -1))
        assert status == 503
        status, body = server.request("GET", "/v1/topics/t/records?offset=0&limit=3")
        assert status == 200 and len(body["records"]) == 3
        status, body = server.request("GET", "/v1/topics/t/queues/work")
        assert status == 200, body
        status, body = server.request("GET", "/v1/health")
        assert status in (200, 503), body  # may name the failing writer, never hang
        full_answer, body = server.request("PUT", "/v1/topics/while-full", {"partitions": 3})
        assert full_answer in (200, 503), body  # made whole, or refused: never half made

        # Space returns: writes succeed again, no restart.
        ballast.unlink()
        status, body = server.request("POST", "/v1/topics/t/records", b"after")
        assert status == 200, body
        acked[body["acks"][0]["offset"]] = b"after"
        status, body = server.request("PUT", "/v1/topics/while-full", {"partitions": 3})
        assert status == 200 and body["partitions"] == 3, body  # what a refusal left is no obstacle
        status, body = server.request(
            "POST", "/v1/topics/t/queues/work/lease", {"max_records": 2, "wait_ms": 0}
        )
        assert status == 200 and len(body["jobs"]) == 2, body
        receipts = [job["receipt"] for job in body["jobs"]]
        status, body = server.request(
            "POST", "/v1/topics/t/queues/work/ack", {"receipts": receipts}
        )
        assert status == 200, body
    finally:
        server.close()  # kill -9

    with brook.open(str(data)) as b:
        stored = []
        while batch := b.topic("t").read(0, len(stored), 500):
            stored.extend(batch)
        assert [r.offset for r in stored] == list(range(len(stored)))
        assert {r.offset: r.value for r in stored} == acked, "stored records differ from acked"
        assert b.queue("t", "work").stats()["acked"] == 2
        names = {info.name: info.partitions for info in b.topics()}
        assert names["while-full"] == 3
        assert b.topic("while-full").end_offsets() == {0: 0, 1: 0, 2: 0}
    assert os.access(data, os.R_OK)
    print(
        f"{len(acked)} records acked on an {SIZE >> 20} MiB disk, {refused} refused, all back; "
        f"a topic created while full: {full_answer}"
    )


def test_segment_rolls_on_a_full_disk_lose_nothing(small_disk: Path) -> None:
    """Small segments, so the disk fills while segments roll: a new segment that
    cannot be created fails its batch like a write that cannot be made."""
    seed = random.randrange(2**32)
    print(f"full disk (rolls) seed {seed}")
    data = small_disk / "data"
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * (1024 * 1024))
    acked: dict[tuple[int, int], bytes] = {}
    failures = 0
    with brook.open(str(data), segment_bytes_max=64 * 1024) as b:
        t = b.topic("t")
        b.create_topic("t", partitions=2)
        for i in range(10_000):
            try:
                ack = t.append(value(seed, i), key=str(i).encode())
            except StorageError:
                failures += 1
                if failures == 20:
                    break
                continue
            acked[(ack.partition, ack.offset)] = value(seed, i)
        assert failures == 20 and len(acked) > 100, (failures, len(acked))
        ballast.unlink()
        ack = t.append(b"after")
        acked[(ack.partition, ack.offset)] = b"after"
    with brook.open(str(data)) as b:
        stored = {
            (r.partition, r.offset): r.value
            for p in range(2)
            for r in b.topic("t").read(p, 0, 100_000)
        }
        assert stored == acked
    print(f"{len(acked)} records acked across segment rolls, {failures} refused, all back")
