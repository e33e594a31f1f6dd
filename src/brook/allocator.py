"""Large freed buffers go back to the system, in the process `brook serve` owns.

glibc's malloc gives an allocation of at least M_MMAP_THRESHOLD bytes its own
mapping, which `free` returns to the system at once. By default the threshold
moves: it rises to the size of each such buffer freed (up to 32 MiB), so after
one 3 MB buffer the next ones come from the heap, where a freed chunk below a
live one stays resident for good. A broker frees large buffers all the time
(segment reads, request bodies, a timer bucket's merged run), and its resident
memory would rise with each new largest one: merging timer runs of 0.6 to 6.7 MB
one after another left 10 MiB resident, 3.7 with the threshold fixed; twenty
3 MiB buffers freed after an 8 MiB one leave 7.4 MiB resident, and nothing with
it (tests/test_allocator.py). Setting the threshold turns the moving off
(mallopt(3)): buffers of a MiB or more are mapped and unmapped, each costing a
few page faults, small beside the fsync that follows nearly every one of them.

Only `brook serve` sets it: an embedded broker lives in the user's process,
whose allocator is theirs to tune. An operator's MALLOC_MMAP_THRESHOLD_ wins.
"""

from __future__ import annotations

import ctypes
import os

M_MMAP_THRESHOLD = -3
"""glibc's mallopt parameter (malloc.h)."""
LARGE_BUFFER_BYTES = 1 << 20


def give_back_large_buffers() -> bool:
    """Fix glibc's mmap threshold at LARGE_BUFFER_BYTES; False where it was not set
    (another C library, or the operator's own setting in the environment)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    libc = ctypes.CDLL(None)  # the C library the interpreter runs on
    if not hasattr(libc, "gnu_get_libc_version"):  # musl ignores it; macOS has no mallopt
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES))
