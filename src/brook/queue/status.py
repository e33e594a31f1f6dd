"""The status log's entries, as bytes. Pure: no I/O.

A queue group's status log is an internal, one-partition log in the same
storage as the records (`topics/__queues/<topic>/<group>/0/`). Each record in it
is one `Entry`, appended by one call (a lease, an ack of a batch, ...):

- `changes`: transitions of records, (partition, offset, transition), in the
  order they happened;
- `lettered`: records whose copy in the dead-letter topic is now durable,
  (partition, offset, the `at_ms` of the death it copies);
- `snapshot`: the whole group state at that point, which makes every entry
  before it unnecessary for a restart (so older segments can be deleted); a
  replay (acked records sent again) is written as one.

The log is never updated in place; the state is the fold of its entries
(`brook.queue.group.GroupCore.rebuild`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import msgspec

from brook.models import State, Transition
from brook.queue.lifecycle import JobState

Position = tuple[int, int]


class Snapshot(msgspec.Struct, array_like=True, frozen=True, omit_defaults=True):
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
    jobs: list[tuple[int, int, JobState]]
    """Records leased at least once, or redriven: leased, retrying, ready again, or dead."""
    unlettered: list[tuple[int, int, int]]
    """Dead records whose dead-letter copy was not yet known durable."""
    acked_count: int
    results: list[tuple[int, int, int, int, bytes]] = []
    """(partition, offset, at_ms, attempt, result) of the results kept (queue/results.py)."""
    replaying: list[tuple[int, int, int, int, list[int]]] = []
    """(partition, next, stop, at_ms, skip) of each replay under way (queue/replay.py):
    the records from `next` to before `stop`, but those at `skip`, go back to work, a
    window at a time, as if redriven at `at_ms`. Only a snapshot starts a replay, so
    the log needs no other entry for it. (Last: a broker from before replays reads a
    snapshot and leaves the replay out.)"""


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


class Folded(NamedTuple):
    """What a restart needs of the status log: its newest snapshot and what came after."""

    snapshot: Snapshot | None
    snapshot_offset: int
    """The status-log offset of that snapshot (0 without one)."""
    changes: list[tuple[Position, Transition]]
    """The transitions after the snapshot, in log order."""
    unlettered: dict[Position, int]
    """Dead records whose dead-letter copy is not known durable: the death's at_ms."""


def fold(entries: Iterable[tuple[int, Entry]]) -> Folded:
    """Fold (status-log offset, entry) pairs, oldest first."""
    snapshot: Snapshot | None = None
    snapshot_offset = 0
    changes: list[tuple[Position, Transition]] = []
    unlettered: dict[Position, int] = {}
    for offset, entry in entries:
        if entry.snapshot is not None:
            snapshot, changes, snapshot_offset = entry.snapshot, [], offset
            unlettered = {(p, o): at for p, o, at in snapshot.unlettered}
        for p, o, transition in entry.changes:
            changes.append(((p, o), transition))
            if transition.state is State.DEAD:
                unlettered[(p, o)] = transition.at_ms
            else:
                unlettered.pop((p, o), None)
        for p, o, at in entry.lettered:
            if unlettered.get((p, o)) == at:
                del unlettered[(p, o)]
    return Folded(snapshot, snapshot_offset, changes, unlettered)
