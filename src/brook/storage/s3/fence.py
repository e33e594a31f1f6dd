"""Ending the chunk sequences of a prefix's previous owner: the fences of a take-over.

An appendable file is its chunks numbered without a gap, each created with
If-None-Match, so one object with a chunk's number decides who wrote it. A
broker taking a prefix over (after raising the epoch in the manifest) creates
an empty chunk — a fence — past the end of every appendable file before it
reads any of them. Whichever of the two brokers creates a number first keeps
it: the previous owner's PUT of a fenced number is refused and it learns it
was fenced; everything it wrote below the fence was there before the fence
and is read by the new owner.

A busy owner may create the next number between the newcomer's listing and its
fence. So the newcomer fences a window of consecutive numbers at once, and a
wider one each round it loses: the owner writes its chunks one after another,
so the numbers it wins in a window are the window's first ones, and it stops at
the first number the newcomer holds. Once the newcomer holds one number of a
window, every number up to the window's end is taken (by a chunk or a fence)
and the file ends there for good.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import TYPE_CHECKING

from brook.errors import StorageError
from brook.storage.s3 import manifest as m
from brook.storage.s3.objects import Exists

if TYPE_CHECKING:
    from brook.storage.s3 import S3Storage
    from brook.storage.s3.chunks import ChunkTable

FENCE_WIDTH_FIRST = 2
"""Numbers fenced at once in the first round; doubled in each round lost."""
FENCE_ROUNDS_MAX = 10
"""Rounds before giving up (the last window is 1,024 numbers wide)."""


def fence_file(
    storage: S3Storage,
    name: str,
    entry: m.Entry,
    requests: Executor,
    listed: ChunkTable | None = None,
    width: int = FENCE_WIDTH_FIRST,
) -> ChunkTable:
    """Fence appendable file `name` and return its chunk table, final for the previous
    owner. `listed`: its table as listed already; `width`: the first window (1 when the
    previous owner released the prefix: it writes nothing more, so no number is raced
    for; a write of it that lands late still only widens the next window).
    Raises StorageError (or Fenced, if yet another broker took over meanwhile)."""
    assert entry.chunks is not None
    prefix = entry.chunks
    table = listed if listed is not None else storage.load_table(entry)
    start = table.next_seq
    for _ in range(FENCE_ROUNDS_MAX):
        numbers = range(start, start + width)
        won = list(requests.map(lambda seq: _put_fence(storage, prefix, seq), numbers))
        if all(won) and start == table.next_seq:
            for _ in numbers:  # nothing landed since the listing: the fences follow it
                table.add(0)
            return table
        if any(won):
            table = storage.load_table(entry)  # learn the sizes of the chunks it wrote meanwhile
            if table.next_seq < start + width:
                raise StorageError(f"{name}: chunk {table.next_seq} vanished while fencing")
            return table
        start, width = start + width, width * 2
    raise StorageError(
        f"{name}: could not fence the previous owner's chunks in {FENCE_ROUNDS_MAX} rounds"
    )


def _put_fence(storage: S3Storage, prefix: str, seq: int) -> bool:
    """Create the empty chunk `seq`; False when the number was taken already."""
    try:
        storage.bucket.create(m.chunk_key(prefix, seq), b"")
    except Exists:
        return False
    return True
