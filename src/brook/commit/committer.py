"""The committer: the one writer of every partition log of a broker.

Callers hand it AppendRequests. A round of them is written as one batch per
partition by the *writer* (encode + write, no sync); the *syncer* then syncs
each partition once and only then answers the round's callers: with acks after
a successful sync, with the error when a write or sync failed. A failed sync is
never retried-then-acknowledged: every batch of that partition not yet durable
is dropped from the log and its callers get StorageError.

With a write-ahead log (local directories; log/wal.py) the round's batches also go
to the WAL as one write, and the syncer makes the whole round durable with one sync of
the WAL, however many partitions it touched: durability per round, not per partition
(SPEC §0). The segments are then synced by checkpoints (commit/checkpoint.py). A WAL
that fails stops every round in flight; the writer waits until all are answered and
cuts the WAL back before it writes again (WriteAheadLog.repair).

The writer and the syncer are two threads so that one round is written while
the previous one is being synced (a pipeline): the sync runs without the GIL,
the writing and the callers' own work run with it.

The writer role is held by the committer thread, or, when nothing is queued or
in flight and the last round had a single request, by the calling thread itself
(`append`), which then writes, syncs and answers its own batch: a lone producer
pays no cross-thread wake-ups (on small VMs each costs tens of microseconds).

Control work (topic creation and deletion, retention) runs with the writer role
once every in-flight batch is settled, so nothing else touches a log meanwhile.

No caller waits forever. Both threads are supervised (brook/supervisor.py): an
unexpected error answers every request of the round it hit with StorageError,
is reported, and the thread goes on. A caller's `on_done` that raises is
logged and cannot stop the answers to others. Closing answers whatever is
still queued with Closed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat
from typing import Any

from brook import limits
from brook.commit.checkpoint import Checkpointer, Dirty
from brook.commit.dedup import Inflight, Plan
from brook.commit.policy import flush_delay
from brook.commit.requests import AppendRequest, Waiter, answer_with, call_back
from brook.errors import BrookError, Closed, Overloaded, StorageError
from brook.idempotency import IdempotencyIndex
from brook.log.partition import PartitionLog, Written
from brook.log.wal import Piece, WriteAheadLog, wal_bodies
from brook.log.wal import recover as wal_recover
from brook.records import Ack
from brook.stats import CommitStats
from brook.supervisor import Supervisor

log = logging.getLogger("brook.commit")


Clock = Callable[[], float]
"""Seconds since the epoch; injected so tests can move time."""


class _Control:
    """A function to run with the writer role between rounds."""

    __slots__ = ("done", "error", "fn", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class _Batch:
    """One round's batch for one partition: written, then synced, then answered."""

    __slots__ = (
        "acks_by_slot",
        "error",
        "group",
        "log",
        "plan",
        "started",
        "wal_generation",
        "written",
    )

    def __init__(self, log: PartitionLog, group: list[AppendRequest], plan: Plan | None) -> None:
        self.started = time.monotonic()
        self.log = log
        self.group = group
        self.plan = plan
        self.written: Written | None = None
        self.error: BrookError | None = None
        self.wal_generation = -1
        """The WAL's generation when the batch went into it (durable only if unchanged)."""
        self.acks_by_slot: list[Ack] = []
        """Once durable: the ack of each record appended in this batch."""


class Committer:
    def __init__(
        self,
        idempotency: IdempotencyIndex,
        linger_ms: float = limits.linger_ms_default,
        batch_bytes_max: int = limits.batch_bytes_max_default,
        clock: Clock = time.time,
        maintenance: Callable[[], None] | None = None,
        maintenance_every_s: float = limits.retention_check_ms / 1000,
        on_round: Callable[[frozenset[str]], None] | None = None,
        supervisor: Supervisor | None = None,
        queue_bytes_max: int = limits.commit_queue_bytes_max,
        wal: WriteAheadLog | None = None,
        checkpoint_interval_ms: int = limits.checkpoint_interval_ms_default,
        wal_bytes_max: int = limits.wal_bytes_max_default,
        dirty_files_max: int = 4096,
    ) -> None:
        """With `wal` (started, after replay), rounds are made durable in it and the
        segments by checkpoints; without, each partition a round wrote is synced."""
        self.idempotency = idempotency
        self.queue_bytes_max = queue_bytes_max
        self.supervisor = supervisor or Supervisor()
        self.linger_s = linger_ms / 1000
        self.batch_bytes_max = batch_bytes_max
        self.clock = clock
        self.maintenance = maintenance
        self.maintenance_every_s = maintenance_every_s
        self.on_round = on_round
        """Called after each synced round is answered (wakes long-polling readers)."""
        self.stats = CommitStats()
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[AppendRequest | _Control] = []
        self._bytes = 0
        self._first_arrival = 0.0
        self._quiet = 0.0
        """How long no round had been taken when the pending batch's first request came."""
        self._last_round = 0.0
        """When the last round was begun, or answered (monotonic seconds)."""
        self._previous_requests = 1
        self._busy = False
        self._closing = False
        self._inflight_keys: Inflight = {}
        """Idempotency keys written but not yet durable (writer thread only)."""
        self._sync_cond = threading.Condition(threading.Lock())
        self._to_sync: list[_Batch] = []
        self._syncing = False
        self._syncer_stop = False
        self._sync_pool: ThreadPoolExecutor | None = None
        """Syncs partitions side by side; started on first need."""
        self.wal = wal
        self.wal_bytes_max = wal_bytes_max
        self._dirty = Dirty()
        self._damage_lock = threading.Lock()
        self._damaged: set[PartitionLog] = set()
        """Partitions whose active segment must be written again from the WAL."""
        self.checkpointer: Checkpointer | None = None
        if wal is not None:
            self.checkpointer = Checkpointer(
                wal,
                self._dirty,
                self.stats,
                self.supervisor,
                lambda: int(self.clock() * 1000),
                self._checkpoint_damaged,
                lambda: bool(self._damaged),
                interval_ms=checkpoint_interval_ms,
                wal_bytes_max=wal_bytes_max,
                dirty_files_max=dirty_files_max,
            )
        self._syncer = threading.Thread(target=self._sync_loop, name="brook-syncer", daemon=True)
        self._syncer.start()
        self._thread = threading.Thread(target=self._run, name="brook-committer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ callers

    def append(self, request: AppendRequest) -> list[Ack]:
        """Append and wait until durable (for threads that may block); returns the acks."""
        with self._cond:
            if self._closing:
                raise Closed("the broker is closed")
            lead = (
                not self._busy
                and not self._queue
                and self._previous_requests <= 1
                and not self._to_sync
                and not self._syncing
            )
            if lead:
                self._busy = True
            else:
                waiter = Waiter()
                request.on_done = waiter
                self._enqueue(request)
        if lead:
            try:
                batches = self._write_round([request])
                self._sync_and_answer(batches)
            finally:
                self._release_role()
        else:
            waiter.wait()
        return request.result()

    def submit(self, request: AppendRequest) -> None:
        """Queue a request without waiting; its on_done runs on the syncer once answered."""
        assert request.on_done is not None
        with self._cond:
            if self._closing:
                raise Closed("the broker is closed")
            self._enqueue(request)

    def _enqueue(self, request: AppendRequest) -> None:
        size = request.columns.bytes
        if self._bytes and self._bytes + size > self.queue_bytes_max:
            raise Overloaded(
                f"{self._bytes} bytes of records wait to be written already "
                f"(commit_queue_bytes_max {self.queue_bytes_max}); try again soon"
            )
        self._queue.append(request)
        self._bytes += request.columns.bytes
        if len(self._queue) == 1:
            self._first_arrival = time.monotonic()
            self._quiet = self._first_arrival - self._last_round
            self._cond.notify()
        elif len(self._queue) >= self._previous_requests or self._bytes >= self.batch_bytes_max:
            self._cond.notify()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` with the writer role once in-flight batches settle; return or raise its outcome."""
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
        """Answer everything queued and in flight, then stop both threads. Idempotent."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()
        with self._sync_cond:
            self._syncer_stop = True
            self._sync_cond.notify()
        self._syncer.join()
        if self._sync_pool is not None:
            self._sync_pool.shutdown()
        if self.wal is not None and self.wal.broken is not None:
            # Every round is answered: cut off what failed, so a restart never replays it.
            try:
                self.wal.repair()
            except StorageError as exc:
                log.warning("the write-ahead log could not be cut back at close: %s", exc.message)
        if self.checkpointer is not None:
            self.checkpointer.close()
        if self.wal is not None:
            self.wal.close()
        with self._cond:  # nothing is left after a clean drain; this is the guarantee
            left, self._queue = self._queue, []
        closed = Closed("the broker is closed")
        for item in left:
            if isinstance(item, AppendRequest):
                answer_with(item, closed)
            else:
                item.error = closed
                item.done.set()

    # ------------------------------------------------------------ writer

    def _release_role(self) -> None:
        with self._cond:
            self._busy = False
            if self._queue or self._closing:
                self._cond.notify()

    def _take(self, next_maintenance: float) -> list[AppendRequest | _Control] | None:
        """Wait for work and take the writer role; None once closed and drained."""
        with self._cond:
            while True:
                now = time.monotonic()
                if self._busy:
                    # A caller is running its own round; look again when it is done,
                    # or soon, so maintenance is not put off by a steady lone producer.
                    self._cond.wait(0.05)
                elif self._queue:
                    controls = any(isinstance(r, _Control) for r in self._queue)
                    delay = 0.0
                    if not (controls or self._closing):
                        delay = flush_delay(
                            now,
                            self._first_arrival,
                            len(self._queue),
                            self._bytes,
                            self._previous_requests,
                            self.linger_s,
                            self.batch_bytes_max,
                            self._quiet,
                            bool(self._to_sync) or self._syncing,  # (a hint: read unlocked)
                        )
                    if delay <= 0:
                        taken = self._take_round()
                        self._busy = True
                        return taken
                    self._cond.wait(delay)
                elif self._closing:
                    return None
                elif now >= next_maintenance:
                    self._busy = True
                    return []
                else:
                    self._cond.wait(next_maintenance - now)

    def _take_round(self) -> list[AppendRequest | _Control]:
        """Take queued work up to batch_bytes_max (always at least one item), so no
        batch outgrows the format: at most batch_bytes_max plus one request."""
        total = 0
        for count, item in enumerate(self._queue):
            if isinstance(item, AppendRequest):
                if count and total + item.columns.bytes > self.batch_bytes_max:
                    break
                total += item.columns.bytes
        else:
            count = len(self._queue)
        taken, self._queue = self._queue[:count], self._queue[count:]
        self._bytes -= total
        if self._queue:
            self._first_arrival = time.monotonic()
            self._quiet = 0.0  # they came while this round gathered: not after a quiet spell
        return taken

    def _run(self) -> None:
        next_maintenance = time.monotonic() + self.maintenance_every_s
        while True:
            taken = self._take(next_maintenance)
            if taken is None:
                break
            requests = [r for r in taken if isinstance(r, AppendRequest)]
            try:
                if requests:
                    try:
                        batches = self._write_round(requests)
                    except Exception as exc:  # a bug: the round's callers get an answer
                        self.supervisor.failed("committer", exc)
                        error = StorageError(f"internal error while writing: {exc!r}")
                        for request in requests:
                            answer_with(request, error)
                    else:
                        self._hand_to_syncer(batches)
                        self.supervisor.succeeded("committer")
                controls = [r for r in taken if isinstance(r, _Control)]
                due = self.maintenance is not None and time.monotonic() >= next_maintenance
                if controls or due:
                    self._wait_synced()
                for control in controls:
                    self._run_control(control)
                if due and self.maintenance is not None:
                    next_maintenance = time.monotonic() + self.maintenance_every_s
                    self._run_control(_Control(self.maintenance))
            finally:
                self._release_role()
                taken, requests = None, []  # hold no round's records while waiting
        self._wait_synced()

    def _run_control(self, control: _Control) -> None:
        try:
            control.value = control.fn()
        except BaseException as exc:  # handed to the caller, who re-raises it
            control.error = exc
            if not isinstance(exc, BrookError):
                log.exception("control work failed")
        control.done.set()

    def checkpoint(self) -> None:
        """Make every segment durable up to the WAL's synced end now, and let the WAL go
        of it (no-op without a WAL): damaged tails are written again from the WAL first,
        with the writer role. Raises StorageError (while one still fails, the WAL stays)."""
        if self.checkpointer is None:
            return
        if self._damaged:
            self.call(self._ready_wal)
        self.checkpointer.checkpoint()

    def topic_dropped(self, topic: str) -> None:
        """Record a topic's deletion in the WAL, with the writer role (Core's control
        work), so replay never puts its old records into a topic of the same name."""
        if self.wal is not None:
            self._ready_wal()
            self.wal.topic_dropped(topic, int(self.clock() * 1000))

    def _ready_wal(self) -> None:
        """Before a round (writer role): a broken WAL repaired once every round in flight
        is answered; a full one checkpointed. Raises StorageError (the round fails)."""
        wal = self.wal
        assert wal is not None and self.checkpointer is not None
        if wal.broken is not None:
            self._wait_synced()
            wal.repair()
        if self._damaged:
            self._wait_synced()
            self._rewrite_damaged()
        if wal.bytes_since_checkpoint >= self.wal_bytes_max:
            self._wait_synced()
            self.checkpointer.checkpoint()

    def _note_damage(self, logs: Iterable[PartitionLog]) -> None:
        """Partitions whose segment sync or cut failed: written again before the next round."""
        with self._damage_lock:
            self._damaged.update(x for x in logs if x.damaged is not None)

    def _checkpoint_damaged(self, logs: Iterable[PartitionLog]) -> None:
        """A checkpoint's syncs failed: write the damaged tails again as soon as the writer
        role is free, not at the next round (none may come, and readers would wait)."""
        self._note_damage(logs)
        if not self._damaged:
            return
        with self._cond:
            if not self._closing:
                self._queue.append(_Control(self._repair_now))
                self._cond.notify()

    def _repair_now(self) -> None:
        try:
            self._ready_wal()
        except StorageError as exc:
            log.warning("writing damaged segments again failed (tried again later): %s", exc)

    def _rewrite_damaged(self) -> None:
        """Write the damaged partitions' tails again from the WAL (writer role, nothing in
        flight). Raises StorageError while any still fails: no round is written meanwhile."""
        assert self.wal is not None
        with self._damage_lock:
            damaged = list(self._damaged)
        entries = wal_recover(self.wal.storage).entries
        for partition_log in damaged:
            partition_log.rewrite(wal_bodies(entries, partition_log.topic, partition_log.partition))
            with self._damage_lock:
                self._damaged.discard(partition_log)

    def _write_round(self, requests: list[AppendRequest]) -> list[_Batch]:
        """Write one round as one batch per partition, without syncing (writer role held)."""
        self._previous_requests = len(requests)
        self._last_round = time.monotonic()
        now_ms = int(self.clock() * 1000)
        by_log: dict[PartitionLog, list[AppendRequest]] = {}
        for request in requests:
            by_log.setdefault(request.log, []).append(request)
        batches: list[_Batch] = []
        if self.wal is not None:
            try:
                self._ready_wal()
            except StorageError as exc:
                for partition_log, group in by_log.items():
                    batch = _Batch(partition_log, group, None)
                    batch.error = exc
                    batches.append(batch)
                return batches
        for partition_log, group in by_log.items():
            batch = _Batch(partition_log, group, None)
            batches.append(batch)
            try:
                batch.plan = Plan(self.idempotency, self._inflight_keys, batch)
                if batch.plan.count:
                    if partition_log.roll_due(now_ms):
                        self._wait_synced()  # a segment is sealed only once all its batches are durable
                    batch.written = partition_log.append(batch.plan.pieces, now_ms)
                    batch.plan.remember_inflight(self._inflight_keys)
            except Exception as exc:
                if self.wal is None:
                    partition_log.fail()
                else:  # earlier batches of the partition are in the WAL: keep them
                    partition_log.undo_append()
                    self._note_damage([partition_log])
                batch.error = _as_brook_error(partition_log, exc)
        if self.wal is not None:
            self._log_round(batches, now_ms)
        return batches

    def _log_round(self, batches: list[_Batch], now_ms: int) -> None:
        """Write the round's batches to the WAL as one write (writer role held)."""
        assert self.wal is not None and self.checkpointer is not None
        written = [b for b in batches if b.error is None and b.written is not None]
        if not written:
            return
        self._dirty.add([b.log for b in written])
        pieces = []
        for batch in written:
            assert batch.written is not None
            pieces.append(
                Piece(
                    batch.log.topic,
                    batch.log.partition,
                    batch.written.entries[0].base_offset,
                    batch.written.next_offset,
                    batch.written.parts,
                )
            )
        try:
            appended = self.wal.append(pieces, now_ms)
        except Exception as exc:
            error = exc if isinstance(exc, BrookError) else StorageError(f"internal error: {exc!r}")
            if not isinstance(exc, BrookError):
                log.exception("writing to the write-ahead log failed")
            for batch in written:
                assert batch.written is not None
                batch.log.fail(batch.written.generation)
                batch.error = error
            self._note_damage(b.log for b in written)
            return
        for batch in written:
            batch.wal_generation = appended.generation
        self.stats.wal_bytes = self.wal.bytes_written
        self.stats.wal_pending_bytes = self.wal.bytes_since_checkpoint
        if self.checkpointer.due_now:
            self.checkpointer.nudge()

    # ------------------------------------------------------------ syncer

    def _hand_to_syncer(self, batches: list[_Batch]) -> None:
        with self._sync_cond:
            self._to_sync.extend(batches)
            self._sync_cond.notify()

    def _wait_synced(self) -> None:
        """Block until every batch handed to the syncer is answered."""
        with self._sync_cond:
            while self._to_sync or self._syncing:
                self._sync_cond.wait()

    def _sync_loop(self) -> None:
        while True:
            with self._sync_cond:
                while not self._to_sync and not self._syncer_stop:
                    self._sync_cond.wait()
                if not self._to_sync:
                    return
                batches, self._to_sync = self._to_sync, []
                self._syncing = True
            try:
                self._sync_and_answer(batches)
            except Exception as exc:  # a bug: every caller of the rounds still gets an answer
                self.supervisor.failed("syncer", exc)
                error = StorageError(f"internal error while syncing: {exc!r}")
                for batch in batches:
                    for request in batch.group:
                        answer_with(request, error)
            finally:
                batches = []  # hold no round's records while waiting for the next
                with self._sync_cond:
                    self._syncing = False
                    self._sync_cond.notify_all()
                with self._cond:  # a batch gathering while the disk was busy may go now
                    self._cond.notify()

    def _sync_and_answer(self, batches: list[_Batch]) -> None:
        """Sync the round (the WAL once, or each partition once), publish what became
        durable, answer in order."""
        last: dict[PartitionLog, Written] = {}
        for batch in batches:
            if batch.error is None and batch.written is not None:
                last[batch.log] = batch.written
        if self.wal is None:
            failures = self._sync_all(list(last))
            self.stats.syncs += len(last)
        else:
            failures = self._sync_wal(batches, list(last))
        self.stats.rounds += 1
        for partition_log, written in last.items():
            failure = failures.get(partition_log)
            if failure is not None:
                partition_log.fail(written.generation)
                if self.wal is not None:
                    self._note_damage([partition_log])
                error = _as_brook_error(partition_log, failure)
                for batch in batches:
                    if batch.log is partition_log and batch.error is None:
                        batch.error = error
                continue
            published = partition_log.publish(written)
            for batch in batches:
                if batch.log is not partition_log or batch.error is not None:
                    continue
                # A batch written before a failure cut the file back is gone, even
                # when a batch written after it (a new generation) is now durable.
                stale = batch.written is not None and batch.written.generation != written.generation
                if not published or stale:
                    batch.error = StorageError(
                        "the batch was dropped after an earlier write to its partition failed"
                    )
        for batch in batches:
            self._answer(batch)
        # Its producers come back from now on: not after a quiet spell (flush_delay).
        self._last_round = time.monotonic()
        if self.on_round is not None:
            self.on_round(frozenset(partition_log.topic for partition_log in last))
        self.supervisor.succeeded("syncer")

    def _sync_wal(
        self, batches: list[_Batch], logs: list[PartitionLog]
    ) -> dict[PartitionLog, Exception]:
        """One sync of the WAL for every partition; the partitions it failed for (all,
        when it failed; those whose batches went into a WAL generation since failed)."""
        assert self.wal is not None
        if not logs:
            return {}
        try:
            self.wal.sync()
            self.stats.syncs += 1
        except Exception as exc:
            return dict.fromkeys(logs, exc)
        generation = self.wal.generation
        stale = StorageError("the write-ahead log failed before the batch was durable")
        return {
            b.log: stale
            for b in batches
            if b.error is None and b.written is not None and b.wal_generation != generation
        }

    def _sync_all(self, logs: list[PartitionLog]) -> dict[PartitionLog, Exception]:
        """Sync partitions, side by side when there are several (an fsync, or a PUT to
        the object store, is mostly waiting); returns the failures."""
        failures: dict[PartitionLog, Exception] = {}
        if len(logs) == 1:
            try:
                logs[0].sync()
            except Exception as exc:
                failures[logs[0]] = exc
            return failures
        if self._sync_pool is None:
            self._sync_pool = ThreadPoolExecutor(limits.round_syncs_parallel_max, "brook-sync")
        futures = [(each, self._sync_pool.submit(each.sync)) for each in logs]
        for partition_log, future in futures:
            failure = future.exception()
            if isinstance(failure, Exception):
                failures[partition_log] = failure
            elif failure is not None:
                raise failure
        return failures

    def _answer(self, batch: _Batch) -> None:
        plan = batch.plan
        stats = self.stats
        if batch.error is None and batch.written is not None and plan is not None:
            stats.records_appended += plan.count
            stats.bytes_appended += plan.bytes
            stats.batches_written += 1
        elif batch.error is not None:
            stats.failed_batches += 1
        stats.observe_batch(time.monotonic() - batch.started)
        if batch.error is None and plan is not None:
            if batch.written is not None:
                first = batch.written.entries[0]
                base, timestamp = first.base_offset, first.timestamp
                partition = batch.log.partition
                count = plan.count
                batch.acks_by_slot = list(
                    map(
                        Ack,
                        repeat(partition, count),
                        range(base, base + count),
                        repeat(timestamp, count),
                    )
                )
            plan.resolve(self.idempotency)
        if plan is not None:
            plan.forget_inflight(self._inflight_keys)
        if batch.error is not None:
            log.warning(
                "batch for %s/%d failed: %s", batch.log.topic, batch.log.partition, batch.error
            )
            for request in batch.group:
                request.error = batch.error
        batch.plan = None  # the plan refers to its batch: free the round's records now, not at gc
        for request in batch.group:
            call_back(request)


def _as_brook_error(partition_log: PartitionLog, exc: Exception) -> BrookError:
    """Brook's own errors pass through; anything else is a bug, reported as StorageError."""
    if isinstance(exc, BrookError):
        return exc
    log.exception("writing to %s/%d failed", partition_log.topic, partition_log.partition)
    return StorageError(f"internal error while writing: {exc!r}")
