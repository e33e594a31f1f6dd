"""`brook serve` gives large freed buffers back to the system (brook/allocator.py)."""

from __future__ import annotations

import os
import subprocess
import sys

# A process frees one 8 MiB buffer (which moves glibc's threshold up to 8 MiB by
# default), then twenty 3 MiB buffers, each with a small one allocated after it
# and kept: what stays resident beyond the small ones is what was not given back.
PROGRAM = """
import sys
from brook import allocator
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) * 1024
print(allocator.give_back_large_buffers() if sys.argv[1] == "set" else "unset")
big = bytearray(8 << 20)
del big
before = rss()
kept = []
for _ in range(20):
    buffer = bytearray(b"x" * (3 << 20))
    kept.append(bytearray(64 << 10))
    del buffer
print((rss() - before) / 2**20)
"""


def retained_mib(mode: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    said, retained = result.stdout.split()
    return said, float(retained)


def test_large_freed_buffers_do_not_stay_resident() -> None:
    said, retained = retained_mib("set")
    assert said == "True"
    assert retained < 3, f"{retained:.1f} MiB of freed 3 MiB buffers stayed resident"
    # Without it, glibc keeps freed buffers in the heap: the check above can fail.
    said, retained = retained_mib("unset")
    assert retained > 4, retained


def test_an_operators_own_threshold_is_left_alone() -> None:
    said, _ = retained_mib("set", {"MALLOC_MMAP_THRESHOLD_": str(16 << 20)})
    assert said == "False"
