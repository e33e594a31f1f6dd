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

from brook.queue.group import Position

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
