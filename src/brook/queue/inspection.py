"""A queue group looked at: its records by state, a record's trace and where it stands,
what retention must keep for it. The reading side of `QueueGroup` (queue/shell.py),
kept apart from the calls that change it; nothing here writes to the status log."""

from __future__ import annotations

import bisect
import functools
from typing import TYPE_CHECKING

from brook import limits
from brook.errors import PartitionNotFound
from brook.log.partition import PartitionLog
from brook.models import ErrorGroup, State, Transition
from brook.queue.group import Position
from brook.queue.lifecycle import FINISHED, JobState
from brook.ranges import Ranges
from brook.records import JobInfo, JobStateName

if TYPE_CHECKING:
    from brook.queue.shell import QueueGroup


class Inspection:
    def stats(self: QueueGroup) -> dict[str, int]:
        """Records by state once time has acted (expired leases, due retries); on a
        read-only broker, as its owner last wrote them."""
        if not self.core.read_only:
            self.tick()
        return self.counts()

    def dead_errors(self: QueueGroup) -> list[ErrorGroup]:
        """The groups of the errors the group's dead records died of (error_groups.py),
        each with how many and one whole error, most first."""
        with self.mutex:
            return self.machine.dead_errors()

    def dead_records(
        self: QueueGroup,
        error: str,
        after: Position | None = None,
        limit: int = limits.dead_records_page_default,
    ) -> list[tuple[Position, JobState]]:
        """Up to `limit` dead records of the error group `error` (or of the group of a
        whole error), in order of their place (partition, offset), from just after
        `after` (keyset paging: a page goes on after `after` even when that record was
        redriven meanwhile, or never was in the group)."""
        with self.mutex:
            positions = list(self.machine.dead_in(error))
        positions.sort()  # off the mutex: a group may hold a hundred thousand
        start = 0 if after is None else bisect.bisect_right(positions, after)
        found: list[tuple[Position, JobState]] = []
        with self.mutex:
            jobs = self.machine.jobs
            for position in positions[start:]:
                job = jobs.get(position)
                if job is not None and job.state is State.DEAD:  # (not redriven since)
                    found.append((position, job))
                    if len(found) >= limit:
                        break
        return found

    def leased_receipts(self: QueueGroup) -> list[str]:
        """The receipts of every live lease (for a consumer that knows the holders died:
        the broker's own delivery loop, on start)."""
        with self.mutex:
            return [
                job.receipt
                for job in self.machine.jobs.values()
                if job.state is State.LEASED and job.receipt is not None
            ]

    def counts(self: QueueGroup) -> dict[str, int]:
        """Records by state as they stand, and the oldest ready record's age; writes nothing."""
        with self.mutex:
            self._offer()
            counts = self.machine.stats()
            # Records beyond the window are ready too, only not yet in memory.
            logs = self.core.topic_state(self.topic).logs
            for pl in logs:
                waiting = pl.durable_offset - max(
                    self.offered.get(pl.partition, 0), pl.start_offset
                )
                counts["ready"] += max(0, waiting)
            counts["ready"] += self._replay_waiting(logs)
            oldest = self.machine.oldest_ready_ms()
            now = self._now_ms()
        counts["oldest_ready_age_ms"] = 0 if oldest is None else max(0, now - oldest)
        return counts

    def _replay_waiting(self: QueueGroup, logs: list[PartitionLog]) -> int:
        """Holding the mutex: how many acked records replays will still bring back."""
        return sum(
            r.waiting(logs[p].start_offset)
            for p, rs in self.replaying.items()
            if p < len(logs)
            for r in rs
        )

    def _replays(self: QueueGroup, position: Position) -> bool:
        """Holding the mutex: whether a replay will bring back the record at `position`
        (when it is not kept)."""
        return any(r.covers(position[1]) for r in self.replaying.get(position[0], ()))

    def trace(self: QueueGroup, partition: int, offset: int) -> list[Transition]:
        """The record's transitions kept in the status log, oldest first. PartitionNotFound
        for a partition the topic lacks (as `job` says)."""
        if partition >= len(self.core.topic_state(self.topic).logs):
            raise PartitionNotFound(f"topic {self.topic} has no partition {partition}")
        with self.mutex:
            self._check_usable()
            end = self.status_log.durable_offset
        found: list[Transition] = []
        for at, entry in self._entries():
            if at >= end:
                break
            if entry.snapshot is not None and not found:
                job = next(
                    (j for p, o, j in entry.snapshot.jobs if (p, o) == (partition, offset)), None
                )
                if job is not None:
                    found.append(Transition(job.since_ms, State.READY, 0, "as of a snapshot"))
            found.extend(t for p, o, t in entry.changes if p == partition and o == offset)
        return found

    def finished(self: QueueGroup, partition: int, offset: int) -> bool:
        """Whether the record at (partition, offset) is done with for good (acked or
        dead) or is no record at all: what a long-poll on `job` waits for. Cheap
        (dictionary lookups under the mutex), for the server's event loop."""
        position = (partition, offset)
        with self.mutex:
            pending = self._finishing.get(position)
            if pending is not None:
                if not pending.answered or pending.error is not None:
                    return False  # not durable yet (or failed: the group is rebuilt)
                del self._finishing[position]
            job = self.machine.jobs.get(position)
            if job is not None:
                return job.state in FINISHED
            if self.results.get(position, self._now_ms()) is not None:
                return True
            logs = self.core.topic_state(self.topic).logs
            if partition >= len(logs):
                return True  # no such record
            if self._replays(position):
                return False  # acked, and brought back to run again
            log_ = logs[partition]
            if offset >= log_.durable_offset or offset < log_.start_offset:
                return True  # unknown
            return offset < self.offered.get(partition, 0)

    def finish_pending(self: QueueGroup, partition: int, offset: int) -> bool:
        """Whether an ack or death of the record is on its way to the status log (not
        known durable yet): `finished` will say True once it is."""
        with self.mutex:
            pending = self._finishing.get((partition, offset))
            return pending is not None and not pending.answered

    def wait_finished(self: QueueGroup, partition: int, offset: int, seconds: float) -> None:
        """Wait up to `seconds` for `finished(partition, offset)`; returns either way."""
        monotonic = self.core.clock.monotonic
        deadline = monotonic() + seconds
        ready = functools.partial(self.finished, partition, offset)
        while not ready() and not self.core.closed:
            remaining = deadline - monotonic()
            if remaining <= 0:
                return
            self.core.wait_for_records(ready, remaining)

    def job(self: QueueGroup, partition: int, offset: int) -> JobInfo:
        """Where the record at (partition, offset) stands in the group."""
        logs = self.core.topic_state(self.topic).logs
        if partition >= len(logs):
            raise PartitionNotFound(f"topic {self.topic} has no partition {partition}")
        partition_log = logs[partition]
        position = (partition, offset)
        with self.mutex:
            self._check_usable()
            self._offer()
            now = self._now_ms()
            kept = self.results.get(position, now)
            job = self.machine.jobs.get(position)
            offered = self.offered.get(partition, 0)
            not_before = self.machine.not_before.get(position)
            again = job is None and self._replays(position)
        state: JobStateName
        if again and partition_log.start_offset <= offset:
            return JobInfo(partition=partition, offset=offset, state="pending")
        if job is not None:
            state, due = job.state.value, None
            if job.state is State.READY and not_before is not None and not_before > now:
                state, due = "delayed", not_before
            elif job.state is State.RETRYING:
                due = job.ready_at_ms
            elif job.state is State.LEASED:
                due = job.lease_until_ms
            return JobInfo(
                partition=partition,
                offset=offset,
                state=state,
                attempt=job.attempt,
                error=job.error,
                due_ms=due,
            )
        if kept is not None:
            return JobInfo(
                partition=partition,
                offset=offset,
                state="acked",
                attempt=kept.attempt,
                result=kept.result,
                acked_ms=kept.at_ms,
            )
        if offset >= partition_log.durable_offset or offset < partition_log.start_offset:
            state = "unknown"
        else:
            state = "pending" if offset >= offered else "acked"
        return JobInfo(partition=partition, offset=offset, state=state)

    def needed(self: QueueGroup, partition: int, base: int, next_offset: int) -> Ranges:
        """Offsets from `base` to before `next_offset` of `partition` this group has
        not finished with: kept records (dead ones too), and all not yet offered."""
        with self.mutex:
            kept = Ranges.of(
                o for p, o in self.machine.jobs if p == partition and base <= o < next_offset
            )
            offered = self.offered.get(partition, 0)
        return kept | Ranges([(max(base, offered), next_offset)])
