"""The committer thread: the one writer of every partition log of a broker.

Callers hand it AppendRequests; it gathers them (see policy.py), writes one
batch per partition, syncs each partition once, and only then answers every
caller of that round: with acks after a successful sync, with the error when a
write or sync failed. A failed sync is never retried-then-acknowledged: the
batch is dropped from the log and its callers get StorageError.

It also runs control work (topic creation, deletion, retention) between
rounds, so nothing else ever touches a log's writer side.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from brook import limits
from brook.commit.policy import flush_delay
from brook.errors import BrookError, Closed, StorageError
from brook.idempotency import IdempotencyIndex
from brook.log.partition import PartitionLog
from brook.records import Ack, Record

log = logging.getLogger("brook.commit")

Clock = Callable[[], float]
"""Seconds since the epoch; injected so tests can move time."""


class AppendRequest:
    """Records bound for one partition from one caller, and the answer to them."""

    __slots__ = ("acks", "bytes", "error", "idempotency_keys", "log", "on_done", "records")

    def __init__(
        self,
        log: PartitionLog,
        records: Sequence[Record],
        idempotency_keys: Sequence[bytes | None] | None,
        size_bytes: int,
        on_done: Callable[[AppendRequest], None],
    ) -> None:
        self.log = log
        self.records = records
        self.idempotency_keys = idempotency_keys
        self.bytes = size_bytes
        self.on_done = on_done
        self.acks: list[Ack] | None = None
        self.error: BrookError | None = None

    def result(self) -> list[Ack]:
        """The acks, or the error raised; only valid once on_done has been called."""
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


class _Control:
    """A function to run on the committer thread between rounds."""

    __slots__ = ("done", "error", "fn", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class Committer:
    def __init__(
        self,
        idempotency: IdempotencyIndex,
        linger_ms: float = limits.linger_ms_default,
        batch_bytes_max: int = limits.batch_bytes_max_default,
        clock: Clock = time.time,
        maintenance: Callable[[], None] | None = None,
        maintenance_every_s: float = limits.retention_check_ms / 1000,
        on_round: Callable[[], None] | None = None,
    ) -> None:
        self.idempotency = idempotency
        self.linger_s = linger_ms / 1000
        self.batch_bytes_max = batch_bytes_max
        self.clock = clock
        self.maintenance = maintenance
        self.maintenance_every_s = maintenance_every_s
        self.on_round = on_round
        """Called after each round's callers are answered (wakes long-polling readers)."""
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[AppendRequest | _Control] = []
        self._bytes = 0
        self._first_arrival = 0.0
        self._previous_requests = 1
        self._closing = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="brook-committer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ callers

    def submit(self, request: AppendRequest) -> None:
        """Queue a request; its on_done runs on the committer thread once answered."""
        with self._cond:
            if self._closing:
                raise Closed("the broker is closed")
            self._queue.append(request)
            self._bytes += request.bytes
            if len(self._queue) == 1:
                self._first_arrival = time.monotonic()
                self._cond.notify()
            elif len(self._queue) >= self._previous_requests or self._bytes >= self.batch_bytes_max:
                self._cond.notify()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the committer thread between rounds; return or raise its outcome."""
        control = _Control(fn)
        with self._cond:
            if self._closing:
                raise Closed("the broker is closed")
            self._queue.append(control)
            self._cond.notify()
        control.done.wait()
        if control.error is not None:
            raise control.error
        return control.value

    def close(self) -> None:
        """Answer everything queued, then stop the thread. Idempotent."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()

    # ------------------------------------------------------------ thread

    def _take(self) -> list[AppendRequest | _Control] | None:
        next_maintenance = time.monotonic() + self.maintenance_every_s
        with self._cond:
            while True:
                if self._queue:
                    now = time.monotonic()
                    controls = any(isinstance(r, _Control) for r in self._queue)
                    delay = (
                        0.0
                        if controls or self._closing
                        else flush_delay(
                            now,
                            self._first_arrival,
                            len(self._queue),
                            self._bytes,
                            self._previous_requests,
                            self.linger_s,
                            self.batch_bytes_max,
                        )
                    )
                    if delay <= 0:
                        taken, self._queue, self._bytes = self._queue, [], 0
                        return taken
                    self._cond.wait(delay)
                elif self._closing:
                    return None
                else:
                    remaining = next_maintenance - time.monotonic()
                    if remaining <= 0:
                        return []
                    self._cond.wait(remaining)

    def _run(self) -> None:
        last_maintenance = time.monotonic()
        while True:
            taken = self._take()
            if taken is None:
                break
            requests = [r for r in taken if isinstance(r, AppendRequest)]
            if requests:
                self._previous_requests = len(requests)
                self._write_round(requests)
            for control in (r for r in taken if isinstance(r, _Control)):
                self._run_control(control)
            if self.maintenance and time.monotonic() - last_maintenance >= self.maintenance_every_s:
                last_maintenance = time.monotonic()
                self._run_control(_Control(self.maintenance))

    def _run_control(self, control: _Control) -> None:
        try:
            control.value = control.fn()
        except BaseException as exc:  # handed to the caller, who re-raises it
            control.error = exc
            if not isinstance(exc, BrookError):
                log.exception("control work failed")
        control.done.set()

    def _write_round(self, requests: list[AppendRequest]) -> None:
        """Write, sync and answer one round of requests."""
        now_ms = int(self.clock() * 1000)
        by_log: dict[PartitionLog, list[AppendRequest]] = {}
        for request in requests:
            by_log.setdefault(request.log, []).append(request)
        written: list[tuple[PartitionLog, list[AppendRequest], _Plan]] = []
        for partition_log, group in by_log.items():
            try:
                plan = _Plan(self.idempotency, partition_log, group)
                if plan.records:
                    plan.base, plan.timestamp = partition_log.append(
                        plan.records, plan.keys, now_ms
                    )
                written.append((partition_log, group, plan))
            except Exception as exc:
                self._fail(partition_log, group, exc)
        for partition_log, group, plan in written:
            try:
                partition_log.commit()
            except Exception as exc:
                self._fail(partition_log, group, exc)
                continue
            plan.answer(self.idempotency)
            for request in group:
                request.on_done(request)
        if self.on_round is not None:
            self.on_round()

    def _fail(
        self, partition_log: PartitionLog, group: list[AppendRequest], exc: Exception
    ) -> None:
        partition_log.abort()
        if isinstance(exc, StorageError):
            error: BrookError = exc
        else:
            log.exception("writing to %s/%d failed", partition_log.topic, partition_log.partition)
            error = StorageError(f"internal error while writing: {exc!r}")
        log.warning(
            "batch for %s/%d failed: %s", partition_log.topic, partition_log.partition, error
        )
        for request in group:
            request.error = error
            request.on_done(request)


class _Plan:
    """Which records of a round's requests to append, after idempotency de-duplication.

    A record whose idempotency key was seen within the window (or earlier in
    this round) is not appended; it is answered with the original's ack.
    """

    def __init__(
        self, index: IdempotencyIndex, log: PartitionLog, group: list[AppendRequest]
    ) -> None:
        self.topic = log.topic
        self.partition = log.partition
        self.records: list[Record] = []
        self.keys: list[bytes | None] | None = None
        self.base = 0
        self.timestamp = 0
        # Per request, per record: an index into self.records, or an Ack already known.
        self.slots: list[list[int | Ack]] = []
        self.group = group
        seen: dict[bytes, int] = {}
        for request in group:
            if request.idempotency_keys is None:
                start = len(self.records)
                self.records.extend(request.records)
                if self.keys is not None:
                    self.keys.extend([None] * len(request.records))
                self.slots.append(list(range(start, len(self.records))))
                continue
            if self.keys is None:
                self.keys = [None] * len(self.records)
            slots: list[int | Ack] = []
            for record, key in zip(request.records, request.idempotency_keys, strict=True):
                known = index.get(self.topic, key) if key is not None else None
                if known is not None:
                    slots.append(known)
                elif key is not None and key in seen:
                    slots.append(seen[key])
                else:
                    if key is not None:
                        seen[key] = len(self.records)
                    slots.append(len(self.records))
                    self.records.append(record)
                    self.keys.append(key)
            self.slots.append(slots)

    def answer(self, index: IdempotencyIndex) -> None:
        """Fill in each request's acks after a successful commit; remember new keys."""
        for request, slots in zip(self.group, self.slots, strict=True):
            request.acks = [
                slot
                if isinstance(slot, Ack)
                else Ack(self.partition, self.base + slot, self.timestamp)
                for slot in slots
            ]
        if self.keys is not None:
            for i, key in enumerate(self.keys):
                if key is not None:
                    index.add(self.topic, key, Ack(self.partition, self.base + i, self.timestamp))
