"""Idempotent produce: remembering which idempotency keys were appended recently.

Keys are stored in the log itself, inside the batches (docs/FORMAT.md), so this
index is only a cache: the broker rebuilds it by scanning the batches newer than
the window as it opens each topic's logs (at start for those the write-ahead log
named, later for the others, before any append reaches them). The committer thread
adds what it appends; a topic's opening adds what it found.

A key is one row of arrays found through its digest (id_index.RowLog), about 100
to 160 bytes: as a dict of (topic, key) to Ack it cost about 320 bytes in Python
objects, 320 MB at the bound of a million keys, and kept the allocator fragmented
by objects living ten minutes among short-lived ones (docs/RELIABILITY.md, soak).
"""

from __future__ import annotations

import threading

from brook import limits
from brook.id_index import Numbers, RowLog
from brook.records import Ack


def _name(topic: str, key: bytes) -> bytes:
    return topic.encode() + b"\0" + key  # a topic name never holds a NUL (names.py)


class IdempotencyIndex:
    """(topic, key) -> the ack of the record first appended with that key.

    Remembers a key for `window_ms` after its record's timestamp, and at most
    `keys_max` keys at once (the oldest are forgotten first).
    """

    def __init__(
        self,
        window_ms: int = limits.idempotency_window_ms_default,
        keys_max: int = limits.idempotency_keys_max,
    ) -> None:
        self.window_ms = window_ms
        self.keys_max = keys_max
        self._rows = RowLog(timestamp="q", offset="q", partition="i", topic="I")
        self._timestamp = self._rows.column("timestamp")
        self._offset = self._rows.column("offset")
        self._partition = self._rows.column("partition")
        self._topics = Numbers()
        self._mutex = threading.Lock()
        """Held to read too: forgetting moves the rows."""

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, topic: str, key: bytes) -> Ack | None:
        with self._mutex:
            i = self._rows.find(_name(topic, key))
            if i is None:
                return None
            return Ack(self._partition[i], self._offset[i], self._timestamp[i])

    def add(self, topic: str, key: bytes, ack: Ack) -> None:
        with self._mutex:
            number = self._topics.number(topic)
            self._rows.add(_name(topic, key), ack.timestamp, ack.offset, ack.partition, number)
            if len(self._rows) > self.keys_max:
                self._rows.forget_oldest("timestamp", -(2**63), self.keys_max)

    def expire(self, now_ms: int) -> None:
        """Forget keys older than the window (they are in timestamp order, but for the
        keys of a topic opened after start: those may stay until the keys added before
        them go, up to a window longer; keys_max bounds them all)."""
        with self._mutex:
            self._rows.forget_oldest("timestamp", now_ms - self.window_ms, self.keys_max)

    def forget_topic(self, topic: str) -> None:
        with self._mutex:
            number = self._topics.known(topic)
            if number is not None:
                self._rows.forget_where("topic", number)
