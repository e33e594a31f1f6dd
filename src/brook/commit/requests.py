"""What a caller hands the committer and waits on: an append request (its records, its
partition, its answer) and a `Waiter` for one; how a request is answered."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from brook.codec.batch import ClientBatches, Columns
from brook.errors import BrookError
from brook.log.partition import PartitionLog
from brook.records import Ack

log = logging.getLogger("brook.commit")


class AppendRequest:
    """Records bound for one partition from one caller, and the answer to them."""

    __slots__ = ("acks", "answered", "columns", "error", "log", "on_done")

    def __init__(
        self,
        log: PartitionLog,
        columns: Columns | ClientBatches,
        on_done: Callable[[AppendRequest], None] | None = None,
    ) -> None:
        self.log = log
        self.columns = columns
        self.on_done = on_done
        self.acks: list[Ack] | None = None
        self.error: BrookError | None = None
        self.answered = False

    def result(self) -> list[Ack]:
        """The acks, or the error raised; only valid once the request is answered."""
        if self.error is not None:
            raise self.error
        assert self.acks is not None
        return self.acks


class Waiter:
    """Blocks a calling thread until its request is answered (a pre-locked lock is the cheapest wake-up)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def __call__(self, request: AppendRequest) -> None:
        self._lock.release()

    def wait(self) -> None:
        self._lock.acquire()


def call_back(request: AppendRequest) -> None:
    """Tell the caller its request is answered; a callback that fails is the
    caller's bug, logged, and never stops the answers to others."""
    request.answered = True
    if request.on_done is None:
        return
    try:
        request.on_done(request)
    except Exception:
        log.exception("a caller's completion callback failed")


def answer_with(request: AppendRequest, error: BrookError) -> None:
    """Answer a request not answered yet with `error` (acks already made stand)."""
    if request.answered:
        return
    if request.acks is None and request.error is None:
        request.error = error
    call_back(request)
