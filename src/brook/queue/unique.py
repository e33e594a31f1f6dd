"""Unique records in a queue group: at most one live record (waiting, delayed,
retrying or leased) of an identity, for `enqueue_unique` (the task layer's unique
jobs and debounce).

An identity is a string the producer chooses (the task layer hashes a task's name and
the arguments that make it unique). A unique record carries it in the header
`brook.unique`, so the index can be rebuilt from the records themselves: after a start
or a rebuild of the group, the first unique call reads the headers of the group's live
records once. Claims of one group take turns (`lock`), so two producers racing with one
identity append one record between them. Entries are not removed eagerly when their
record finishes (a claim checks that the record it finds is still live), only when the
group reports the finish, to keep the index small.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from brook import limits
from brook.models import State
from brook.queue.group import Position
from brook.queue.lifecycle import FINISHED
from brook.records import Record

if TYPE_CHECKING:
    from brook.queue.shell import QueueGroup


HEADER = "brook.unique"


class UniqueIndex:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        """Held by a claim from its look to its record's registration."""
        self.loaded = False
        """Whether the live records' identities were read since the group was (re)built."""
        self.by_identity: dict[str, Position] = {}
        self._of: dict[Position, str] = {}

    def reset(self) -> None:
        """The group was rebuilt: read the identities again on the next claim."""
        self.by_identity.clear()
        self._of.clear()
        self.loaded = False

    def add(self, identity: str, position: Position) -> None:
        self.by_identity[identity] = position
        self._of[position] = identity

    def ended(self, position: Position) -> None:
        """The record at `position` finished (acked or dead): its identity is free."""
        identity = self._of.pop(position, None)
        if identity is not None and self.by_identity.get(identity) == position:
            del self.by_identity[identity]


class UniqueRecords:
    """The calls of a queue group that keep one live record per identity (part of
    `QueueGroup`, queue/shell.py): the index above, filled from the records themselves."""

    def enqueue_unique(
        self: QueueGroup,
        identity: str,
        record: Record,
        replace: bool,
        append: Callable[[Record], tuple[int, int]],
    ) -> tuple[Position, bool, list[Position]]:
        """Append `record` (with the header brook.unique: `identity`) unless a live
        record of `identity` is in the group: then (its position, True, []). With
        `replace`, a waiting one (ready, delayed, retrying) is cancelled instead and the
        record appended: (new position, False, [the cancelled]); a leased one is left
        to run. `append` makes the record durable and gives its position."""
        replaced: list[Position] = []
        with self.unique.lock:
            self._load_unique()
            with self.mutex:
                self._check_usable()
                self._offer()
                held = self.unique.by_identity.get(identity)
                state = self._live_state(held) if held is not None else None
            if held is not None and state is not None:
                if not replace:
                    return held, True, []
                if state is not State.LEASED:
                    reason = "debounced: a later enqueue of its identity replaced it"
                    replaced = self.cancel([held], None, reason)
            headers = {**(record.headers or {}), HEADER: identity.encode()}
            position = append(Record(record.value, record.key, headers))
            with self.mutex:
                self.unique.add(identity, position)
        return position, False, replaced

    def _live_state(self: QueueGroup, position: Position) -> State | None:
        """Holding the mutex: the record's state if it is live (not acked or dead; one
        not yet taken into the window is READY), else None."""
        job = self.machine.jobs.get(position)
        if job is not None:
            return None if job.state in FINISHED else job.state
        if self._replays(position):
            return State.READY
        return State.READY if position[1] >= self.offered.get(position[0], 0) else None

    def _load_unique(self: QueueGroup) -> None:
        """Holding the unique lock: read the identities of the live records once after
        each (re)build: those in the window, and up to unique_scan_records_max beyond."""
        if self.unique.loaded:
            return
        with self.mutex:
            self._check_usable()
            self._offer()
            live = sorted(p for p, job in self.machine.jobs.items() if job.state not in FINISHED)
            tails = dict(self.offered)
        records = self._fetch(live)
        left = limits.unique_scan_records_max
        for partition_log in self.core.topic_state(self.topic).logs:
            offset = tails.get(partition_log.partition, 0)
            while left > 0 and offset < partition_log.durable_offset:
                got = partition_log.read(offset, min(left, limits.read_records_max))
                if not got:
                    break
                records.extend(got)
                left -= len(got)
                offset = got[-1].offset + 1
        with self.mutex:
            for record in records:
                identity = (record.headers or {}).get(HEADER)
                if identity is not None:
                    position = (record.partition, record.offset)
                    if self._live_state(position) is not None:
                        self.unique.add(identity.decode(errors="replace"), position)
            self.unique.loaded = True
