"""Idempotent produce: remembering which idempotency keys were appended recently.

Keys are stored in the log itself, inside the batches (docs/FORMAT.md), so this
index is only a cache: on open the broker rebuilds it by scanning the batches
newer than the window. Only the committer thread adds to it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from brook import limits
from brook.records import Ack


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
        self._acks: OrderedDict[tuple[str, bytes], Ack] = OrderedDict()
        self._mutex = threading.Lock()

    def get(self, topic: str, key: bytes) -> Ack | None:
        return self._acks.get((topic, key))

    def add(self, topic: str, key: bytes, ack: Ack) -> None:
        with self._mutex:
            self._acks[(topic, key)] = ack
            if len(self._acks) > self.keys_max:
                self._acks.popitem(last=False)

    def expire(self, now_ms: int) -> None:
        """Forget keys older than the window (they are in timestamp order)."""
        horizon = now_ms - self.window_ms
        with self._mutex:
            while self._acks:
                _, oldest = next(iter(self._acks.items()))
                if oldest.timestamp >= horizon:
                    break
                self._acks.popitem(last=False)

    def forget_topic(self, topic: str) -> None:
        with self._mutex:
            for key in [k for k in self._acks if k[0] == topic]:
                del self._acks[key]
