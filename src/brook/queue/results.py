"""What finished jobs returned: kept bounded, for a bounded time. Pure: no I/O.

A consumer may ack a record with a result (the task layer acks with the task's
return value). The result travels in the ACKED transition's outcome, so it is as
durable as the ack; a group keeps the newest ones here, at most
`queue_results_max` of them and `queue_results_bytes_max` bytes, each for
`queue_results_ms`, and a snapshot carries them so a restart loses none that
are still due to be kept. Groups whose acks carry no results (the broker's
delivery groups) keep nothing here.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

from brook import limits

Position = tuple[int, int]


class Kept(NamedTuple):
    at_ms: int
    """When the record was acked."""
    attempt: int
    result: bytes


class Results:
    def __init__(
        self,
        keep_ms: int = limits.queue_results_ms,
        count_max: int = limits.queue_results_max,
        bytes_max: int = limits.queue_results_bytes_max,
    ) -> None:
        self.keep_ms = keep_ms
        self.count_max = count_max
        self.bytes_max = bytes_max
        self._kept: OrderedDict[Position, Kept] = OrderedDict()
        """Oldest ack first."""
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    def add(self, position: Position, kept: Kept) -> None:
        old = self._kept.pop(position, None)
        if old is not None:
            self.bytes -= len(old.result)
        self._kept[position] = kept
        self.bytes += len(kept.result)
        while self._kept and (len(self._kept) > self.count_max or self.bytes > self.bytes_max):
            self._drop_oldest()

    def get(self, position: Position, now_ms: int) -> Kept | None:
        self.expire(now_ms)
        return self._kept.get(position)

    def expire(self, now_ms: int) -> None:
        """Forget the results older than `keep_ms`."""
        kept = self._kept
        while kept and now_ms - next(iter(kept.values())).at_ms >= self.keep_ms:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        _, gone = self._kept.popitem(last=False)
        self.bytes -= len(gone.result)

    def rows(self) -> list[tuple[int, int, int, int, bytes]]:
        """(partition, offset, at_ms, attempt, result) of each kept, oldest first: a
        snapshot's."""
        return [(p, o, k.at_ms, k.attempt, k.result) for (p, o), k in self._kept.items()]
