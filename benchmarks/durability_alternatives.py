"""The ways to make a round over many partitions durable, measured on this machine
(the decision record in docs/ARCHITECTURE.md, "Decisions, in short", issue 49).

Files stand for partitions (1 MiB fallocated each). A round writes one 130-byte record to
each of `per_round` files chosen at random, then makes them durable by one of:
- `each`: fdatasync every file the round wrote, in turn (Brook before the WAL);
- `pool8`: the same fdatasyncs on a pool of 8 threads;
- `syncfs`: one syncfs() of the whole file system;
- `wal`: the round's records also written to one log file, and one fdatasync of it.

Run with `python -m benchmarks.durability_alternatives [FILES] [PER_ROUND] [SECONDS]`
(defaults 1000, 64, 3); prints rounds/s and records/s for each. Not part of `make bench`.
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

RECORD = b"x" * 130
FILE_BYTES = 1 << 20
WAL_BYTES = 64 << 20


def main() -> None:
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    per_round = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    root = tempfile.mkdtemp(prefix="brook-durability-", dir=os.environ.get("BROOK_BENCH_DIR"))
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fds = []
    for i in range(files):
        fd = os.open(f"{root}/p{i}", os.O_WRONLY | os.O_CREAT, 0o600)
        os.posix_fallocate(fd, 0, FILE_BYTES)
        fds.append(fd)
    wal = os.open(f"{root}/wal", os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(wal, b"\0" * WAL_BYTES)
    os.fsync(wal)
    sizes = [0] * files
    wal_at = 0
    pool = ThreadPoolExecutor(8)

    def write_round() -> list[int]:
        chosen = random.sample(range(files), per_round)
        for p in chosen:
            os.pwrite(fds[p], RECORD, sizes[p])
            sizes[p] = (sizes[p] + len(RECORD)) % FILE_BYTES
        return chosen

    def each(chosen: list[int]) -> None:
        for p in chosen:
            os.fdatasync(fds[p])

    def pool8(chosen: list[int]) -> None:
        list(pool.map(os.fdatasync, [fds[p] for p in chosen]))

    def syncfs(chosen: list[int]) -> None:
        if libc.syncfs(fds[0]) != 0:
            raise OSError(ctypes.get_errno(), "syncfs failed")

    def log(chosen: list[int]) -> None:
        nonlocal wal_at
        data = RECORD * len(chosen)
        os.pwrite(wal, data, wal_at)
        wal_at = (wal_at + len(data)) % (WAL_BYTES - len(data))
        os.fdatasync(wal)

    ways: list[tuple[str, Callable[[list[int]], None]]] = [
        ("each", each),
        ("pool8", pool8),
        ("syncfs", syncfs),
        ("wal", log),
    ]
    try:
        for name, durable in ways:
            rounds = 0
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                durable(write_round())
                rounds += 1
            elapsed = time.perf_counter() - start
            print(
                f"{name:7s} files={files} per_round={per_round} rounds/s={rounds / elapsed:,.0f} "
                f"records/s={rounds * per_round / elapsed:,.0f} ms/round={1000 * elapsed / rounds:.3f}",
                flush=True,
            )
    finally:
        pool.shutdown()
        for fd in [*fds, wal]:
            os.close(fd)
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
