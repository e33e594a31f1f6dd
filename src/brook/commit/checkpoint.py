"""Checkpoints: segments made durable in the background, so the WAL can let go.

The committer makes each round durable in the write-ahead log (log/wal.py) and leaves
the segments' copies of it in the page cache. A checkpoint, on its own thread, makes
them durable in turn and records the WAL position they then cover:

1. read the position P the WAL is synced to;
2. take the set of partitions written since the last checkpoint (the committer adds
   each before writing its round to the WAL, so every one written before P is in it);
3. sync each of them (side by side: each sync mostly waits on the disk);
4. write P as the checkpoint (write_atomic) and delete the WAL files wholly before it.

A failed sync leaves the checkpoint where it was and the partitions in the set: their
records stay in the WAL, which replay restores after a crash. Checkpoints that keep
failing make the WAL outgrow `wal_bytes_max`; rounds then wait for a checkpoint and are
answered with StorageError when it fails, never acknowledged without a place to be
durable in. When to begin one is commit/policy.py's `checkpoint_delay`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from brook import limits
from brook.commit.policy import checkpoint_delay
from brook.errors import StorageError
from brook.log.partition import PartitionLog
from brook.log.wal import WriteAheadLog
from brook.stats import CommitStats
from brook.supervisor import Supervisor, retry_after_s

log = logging.getLogger("brook.commit")


class _Damaged(StorageError):
    """A checkpoint refused while a partition waits to be written again."""


class Dirty:
    """Partitions written since the last checkpoint (the committer adds, a checkpoint takes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: set[PartitionLog] = set()

    def add(self, logs: list[PartitionLog]) -> None:
        with self._lock:
            self._logs.update(logs)

    def take(self) -> set[PartitionLog]:
        with self._lock:
            taken, self._logs = self._logs, set()
        return taken

    def give_back(self, logs: set[PartitionLog]) -> None:
        with self._lock:
            self._logs |= logs

    def __len__(self) -> int:
        return len(self._logs)


class Checkpointer:
    """Begins checkpoints when `checkpoint_delay` says, on a supervised thread;
    `checkpoint` runs one on the caller's thread."""

    def __init__(
        self,
        wal: WriteAheadLog,
        dirty: Dirty,
        stats: CommitStats,
        supervisor: Supervisor,
        clock_ms: Callable[[], int],
        on_damage: Callable[[set[PartitionLog]], None],
        damaged: Callable[[], bool] = lambda: False,
        interval_ms: int = limits.checkpoint_interval_ms_default,
        wal_bytes_max: int = limits.wal_bytes_max_default,
        dirty_files_max: int = 4096,
    ) -> None:
        self.wal = wal
        self.dirty = dirty
        self.stats = stats
        self.supervisor = supervisor
        self.clock_ms = clock_ms
        self.on_damage = on_damage
        """Told of the partitions whose sync failed: the page cache may have dropped what
        the WAL alone holds now, so their tails are written again from it."""
        self.damaged = damaged
        """Whether a partition still waits to be written again from the WAL: until it is,
        no checkpoint may let the WAL go (it alone holds that partition's records)."""
        self.interval_s = interval_ms / 1000
        self.wal_bytes_max = wal_bytes_max
        self.wal_bytes_trigger = int(wal_bytes_max * limits.checkpoint_wal_bytes_share)
        self.dirty_files_trigger = max(
            1, int(dirty_files_max * limits.checkpoint_dirty_files_share)
        )
        self._mutex = threading.Lock()
        """One checkpoint at a time (the thread's, a waiting round's, the last at close)."""
        self._cond = threading.Condition()
        self._stop = False
        self._last_s = time.monotonic()
        self._pool: ThreadPoolExecutor | None = None
        self._failures = 0
        self._thread = threading.Thread(target=self._run, name="brook-checkpoint", daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        """Look at the triggers now (the committer calls it after a round that crossed one)."""
        with self._cond:
            self._cond.notify()

    @property
    def due_now(self) -> bool:
        return (
            self.wal.bytes_since_checkpoint >= self.wal_bytes_trigger
            or len(self.dirty) >= self.dirty_files_trigger
        )

    def close(self) -> None:
        """Stop the thread, then checkpoint what is left (after the committer's last round),
        so a restart replays nothing. Idempotent."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join()
        try:
            self.checkpoint()
        except StorageError as exc:
            log.warning("the last checkpoint failed (a restart replays the WAL): %s", exc.message)
        if self._pool is not None:
            self._pool.shutdown()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop:
                    delay = checkpoint_delay(
                        time.monotonic(),
                        self._last_s,
                        self.interval_s,
                        self.wal.bytes_since_checkpoint,
                        self.wal_bytes_trigger,
                        len(self.dirty),
                        self.dirty_files_trigger,
                    )
                    if delay <= 0:
                        break
                    self._cond.wait(delay)
                if self._stop:
                    return
            try:
                self.checkpoint()
            except Exception as exc:
                self._failures += 1
                self.supervisor.failed("checkpoint", exc)
                with self._cond:  # not at once again: give the disk a moment
                    self._cond.wait(retry_after_s(self._failures))
            else:
                self._failures = 0
                self.supervisor.succeeded("checkpoint")

    def checkpoint(self) -> None:
        """Make every segment written before the WAL's synced position durable, then
        record that position (see the module). Raises StorageError."""
        with self._mutex:
            self._last_s = time.monotonic()
            self._refuse_while_damaged()
            position = self.wal.synced
            dirty = self.dirty.take()
            try:
                self._sync_all(dirty)
                self._refuse_while_damaged()
            except BaseException as exc:
                self.dirty.give_back(dirty)  # the next checkpoint syncs them again
                if not isinstance(exc, _Damaged):
                    self.on_damage(dirty)
                raise
            if position > self.wal.checkpointed:
                self.wal.write_checkpoint(position, self.clock_ms())
                self.stats.checkpoints += 1
            self.stats.wal_pending_bytes = self.wal.bytes_since_checkpoint

    def _refuse_while_damaged(self) -> None:
        """No checkpoint while a partition waits to be written again from the WAL (it
        alone holds that partition's records). The writer role is asked to write them
        now, not only before the next round (none may come), and the next checkpoint,
        with or without traffic, looks again."""
        if self.damaged():
            self.on_damage(set())
            raise _Damaged(
                "a partition's segment is damaged and not yet written again: the "
                "write-ahead log keeps its acknowledged records until it is"
            )

    def _sync_all(self, logs: set[PartitionLog]) -> None:
        if not logs:
            return
        if len(logs) == 1:
            next(iter(logs)).checkpoint_sync()
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(limits.checkpoint_syncs_parallel, "brook-ckpt")
            failures = [f.exception() for f in [self._pool.submit(x.checkpoint_sync) for x in logs]]
            failure = next((f for f in failures if f is not None), None)
            if failure is not None:
                raise failure
        self.stats.checkpoint_syncs += len(logs)
