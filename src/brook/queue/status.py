"""The status log's entries, as bytes. Pure: no I/O.

A queue group's status log is an internal, one-partition log in the same
storage as the records (`topics/__queues/<topic>/<group>/0/`). Each record in it
is one `Entry`, appended by one call (a lease, an ack of a batch, ...):

- `changes`: transitions of records, (partition, offset, transition), in the
  order they happened;
- `lettered`: records whose copy in the dead-letter topic is now durable,
  (partition, offset, the `at_ms` of the death it copies);
- `snapshot`: the whole group state at that point, which makes every entry
  before it unnecessary for a restart (so older segments can be deleted).

The log is never updated in place; the state is the fold of its entries
(`brook.queue.group.GroupCore.rebuild`).
"""

from __future__ import annotations

import msgspec

from brook.queue.lifecycle import Job, Transition

Position = tuple[int, int]


class Snapshot(msgspec.Struct, array_like=True, frozen=True):
    """The group at one moment, enough to restart from without anything older.

    Per partition, every record below `floor[p]` is finished (acked); from
    `floor[p]` to `offered[p]`, the records in `acked` runs are acked, those in
    `jobs` are as given, and the rest are ready and untouched (rebuilt from the
    topic). Records from `offered[p]` on are new to the group. So a snapshot's
    size follows the records that were touched, not the backlog.
    """

    offered: dict[int, int]
    floor: dict[int, int]
    acked: list[tuple[int, int, int]]
    """(partition, first offset, offset after the last) of acked records."""
    jobs: list[tuple[int, int, Job]]
    """Records leased at least once, or redriven: leased, retrying, ready again, or dead."""
    unlettered: list[tuple[int, int, int]]
    """Dead records whose dead-letter copy was not yet known durable."""
    acked_count: int


class Entry(msgspec.Struct, array_like=True, frozen=True, omit_defaults=True):
    changes: list[tuple[int, int, Transition]] = []
    lettered: list[tuple[int, int, int]] = []
    snapshot: Snapshot | None = None


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(Entry).decode


def encode(entry: Entry) -> bytes:
    return _encode(entry)


def decode(raw: bytes) -> Entry:
    """An entry from its bytes; raises msgspec.DecodeError when they are not one."""
    return _decode(raw)
