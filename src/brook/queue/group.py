"""One queue group's state, sans I/O: records come in, leases and settlements go
through, and every change comes out as a transition for the status log.

The shell around it (not here) reads records from the topic, appends the
transitions durably, and only then answers the caller; on start it feeds the
status log back through `restore`. Time is always passed in.
"""

from __future__ import annotations

import functools
import heapq
import random
from collections.abc import Hashable, Sequence

from brook import limits
from brook.errors import LeaseExpired
from brook.models import ErrorGroup, State, Transition
from brook.queue import lifecycle as lc
from brook.queue.error_groups import error_group
from brook.queue.fair import FairQueue
from brook.queue.lifecycle import JobState, Settings
from brook.scheduling import Schedule

_READY, _LEASED, _RETRYING, _ACKED, _DEAD = (
    State.READY,
    State.LEASED,
    State.RETRYING,
    State.ACKED,
    State.DEAD,
)

Position = tuple[int, int]
"""(partition, offset) of a record."""
Change = tuple[Position, Transition]

group_of = functools.lru_cache(maxsize=limits.error_groups_cached_max)(error_group)
"""The group of a dead record's error (error_groups.py), remembered: the same few
reasons come back on every record that dies or is redriven."""


class GroupCore:
    def __init__(self, settings: Settings, rng: random.Random) -> None:
        self.settings = settings
        self.rng = rng
        self.jobs: dict[Position, JobState] = {}
        """Every record offered and not yet acked (dead ones stay, for redrive)."""
        self.keys: dict[Position, Hashable] = {}
        """The key of each record kept that has one (most records have none)."""
        self.counts = dict.fromkeys(State, 0)
        """Records by state; acked ones are counted, not kept."""
        self._ready = _ready_queue(settings)
        self.priorities: dict[Position, int] = {}
        """The priority of each record kept that has one other than 0 (most have none)."""
        self.not_before: dict[Position, int] = {}
        """The not-before time of each record kept that has one and was never leased."""
        self._leases: list[tuple[int, Position, str]] = []
        """Heap of (lease end, record, receipt); stale entries are skipped."""
        self._retries: list[tuple[int, Position]] = []
        """Heap of (due, record); stale entries are skipped."""
        self._receipts: dict[str, Position] = {}
        self._serial = 0
        self.dead_by_error: dict[str, dict[Position, None]] = {}
        """The dead records by the group of the error they died of (`group_of`: the
        exception and the task's frame, or the reason with its ids masked), in the order
        the group learned of them: what the dashboard groups and pages through without a
        scan of every record."""

    # ------------------------------------------------------------ records

    def offer(
        self, position: Position, key: Hashable, timestamp_ms: int, schedule: Schedule | None = None
    ) -> None:
        """A record of the topic, new to the group: ready (from its not-before time)."""
        schedules = None if schedule is None else {position[1]: schedule}
        self.offer_many(position[0], [(position[1], key, timestamp_ms)], schedules)

    def offer_many(
        self,
        partition: int,
        records: Sequence[tuple[int, Hashable, int]],
        schedules: dict[int, Schedule] | None = None,
        replayed_at_ms: int | None = None,
    ) -> None:
        """Records (offset, key, timestamp) of one partition, new to the group, in
        offset order: ready. `schedules` gives, by offset, the priority and not-before
        time of the few records that have either. With `replayed_at_ms`, the records
        were acked and a replay at that time brings them back (a new life each)."""
        jobs, keys, add_many = self.jobs, self.keys, self._ready.add_many
        replay = replayed_at_ms is not None
        job = lc.new_job(-1) if replayed_at_ms is None else lc.replayed(replayed_at_ms)
        run: list[Position] = []
        run_key: Hashable = None
        for offset, key, timestamp in records:
            position = (partition, offset)
            assert position not in jobs
            if job.since_ms != timestamp and not replay:  # a batch's records share a timestamp
                job = lc.new_job(timestamp)
            jobs[position] = job  # frozen, so records may share one
            if key is not None:
                keys[position] = key
            schedule = schedules.get(offset) if schedules else None
            if (key != run_key or schedule is not None) and run:
                add_many(run_key, run)
                run = []
            if schedule is not None:
                self._add_scheduled(position, key, schedule)
                continue
            run_key = key
            run.append(position)
        if run:
            add_many(run_key, run)
        self.counts[_READY] += len(records)

    def _add_scheduled(self, position: Position, key: Hashable, schedule: Schedule) -> None:
        priority, not_before = schedule
        if priority:
            self.priorities[position] = priority
        if not_before is not None:
            self.not_before[position] = not_before
        self._ready.add(key, position, priority, not_before)

    # ------------------------------------------------------------ time

    def tick(self, now_ms: int) -> list[Change]:
        """Expired leases end their attempt; due retries become ready; delayed
        records and rate-limited keys whose time has come are ready."""
        self._ready.advance(now_ms)
        changes: list[Change] = []
        while self._leases and self._leases[0][0] <= now_ms:
            _, position, receipt = heapq.heappop(self._leases)
            job = self.jobs.get(position)
            if job is not None and job.state is State.LEASED and job.receipt == receipt:
                self._expire(position, job, now_ms, changes)
        while self._retries and self._retries[0][0] <= now_ms:
            _, position = heapq.heappop(self._retries)
            job = self.jobs.get(position)
            if job is not None and job.state is State.RETRYING and job.ready_at_ms <= now_ms:
                self._expire(position, job, now_ms, changes)
        return changes

    def _expire(
        self, position: Position, job: JobState, now_ms: int, changes: list[Change]
    ) -> None:
        result = lc.expire(job, self.settings, now_ms)
        if result is None:
            return
        self._receipts.pop(job.receipt or "", None)
        self._record(position, result, changes)

    # ------------------------------------------------------------ calls

    def lease(self, now_ms: int, count: int, visibility_ms: int | None = None) -> list[Change]:
        """Up to `count` records, fairly across keys; their LEASED transitions."""
        changes = self.tick(now_ms)
        leased: list[Change] = []
        settings = self.settings
        ages = settings.expire_after_ms is not None
        jobs, receipts = self.jobs, self._receipts
        # One random part per call: receipts stay unguessable, and unique by their serial.
        token = f"{self.rng.getrandbits(32):08x}"
        while len(leased) < count:
            popped = self._ready.pop()
            if popped is None:
                break
            _, position = popped
            job = self.jobs[position]
            if self.not_before:
                self.not_before.pop(position, None)
            if ages:
                expired = lc.expire(job, settings, now_ms)  # past expire_after_ms
                if expired is not None:
                    self._record(position, expired, changes)  # (the pop counted it out)
                    continue
            self._serial += 1
            receipt = f"{position[0]}.{position[1]}.{job.attempt + 1}.{self._serial}.{token}"
            job, transition = lc.lease(job, settings, now_ms, receipt, visibility_ms)
            # The READY -> LEASED case of _enter, inline: this is the hot path.
            jobs[position] = job
            receipts[receipt] = position
            heapq.heappush(self._leases, (job.lease_until_ms, position, receipt))
            leased.append((position, transition))
        counts = self.counts
        counts[_READY] -= len(leased)
        counts[_LEASED] += len(leased)
        if len(self._leases) > 2 * counts[_LEASED] + 1024:
            self._prune_leases()
        return changes + leased

    def settle(
        self,
        now_ms: int,
        receipt: str,
        action: str,
        reason: str = "",
        delay_ms: int | None = None,
        extend_ms: int = 0,
    ) -> list[Change]:
        """ack, nack, extend, discard or release the lease named by `receipt`.
        Raises LeaseExpired."""
        changes = self.tick(now_ms)
        self._settle(changes, now_ms, receipt, action, reason, delay_ms, extend_ms)
        return changes

    def settle_many(
        self,
        now_ms: int,
        receipts: list[str],
        action: str,
        reason: str = "",
        delay_ms: int | None = None,
        extend_ms: int = 0,
    ) -> tuple[list[Change], list[str]]:
        """`settle` each receipt; returns the changes and the receipts that were not live."""
        changes = self.tick(now_ms)
        stale: list[str] = []
        for receipt in receipts:
            try:
                self._settle(changes, now_ms, receipt, action, reason, delay_ms, extend_ms)
            except LeaseExpired:
                stale.append(receipt)
        return changes, stale

    def _settle(
        self,
        changes: list[Change],
        now_ms: int,
        receipt: str,
        action: str,
        reason: str,
        delay_ms: int | None,
        extend_ms: int,
    ) -> None:
        position = self._receipts.get(receipt)
        if position is None:
            raise LeaseExpired("this receipt's lease is no longer live")
        job = self.jobs[position]
        if action == "ack":
            _, transition = lc.ack(job, receipt, now_ms)
            # The LEASED -> ACKED case of _enter, inline: this is the hot path.
            del self.jobs[position]
            del self._receipts[receipt]
            key = self.keys.pop(position, None)
            self._ready.release(key)
            if self.priorities:
                self.priorities.pop(position, None)
            counts = self.counts
            counts[_LEASED] -= 1
            counts[_ACKED] += 1
            changes.append((position, transition))
            return
        if action == "nack":
            result = lc.nack(job, self.settings, receipt, now_ms, reason, delay_ms, self.rng)
        elif action == "extend":
            result = lc.extend(job, receipt, now_ms, extend_ms)
        elif action == "discard":
            result = lc.discard(job, receipt, now_ms, reason)
        elif action == "release":
            result = lc.release(job, receipt, now_ms, reason or "released unsent", delay_ms)
        else:
            raise ValueError(f"unknown action {action!r}")
        self._record(position, result, changes)

    def cancel(
        self, now_ms: int, positions: Sequence[Position], reason: str
    ) -> tuple[list[Change], list[Position]]:
        """Make the records at `positions` that are not out (ready, delayed, waiting to
        retry) dead at once with `reason`; the others are left as they are (out: leased;
        finished: acked or dead; or not in the group). The changes, and the positions
        cancelled."""
        changes = self.tick(now_ms)
        cancelled: list[Position] = []
        for position in dict.fromkeys(positions):
            job = self.jobs.get(position)
            if job is None or job.state not in (_READY, _RETRYING):
                continue
            if job.state is _READY:
                key = self.keys.get(position)
                removed = self._ready.remove(key, position)
                assert removed, f"ready record {position} was not in the ready queue"
                # Counted as if handed out, so that _enter's release (which ends a
                # handed-out record's hold) leaves its key as it was.
                self._ready.holding(key)
                self.not_before.pop(position, None)
            self._record(position, lc.cancel(job, now_ms, reason), changes)
            cancelled.append(position)
        return changes, cancelled

    def redrive(
        self, now_ms: int, limit: int | None = None, positions: Sequence[Position] | None = None
    ) -> list[Change]:
        """Dead records back to work, oldest first; attempts start again. With
        `positions`, only those of them that are dead (others are left as they are)."""
        if positions is None:
            chosen = sorted(p for p, job in self.jobs.items() if job.state is State.DEAD)
        else:
            chosen = sorted({p for p in positions if _is_dead(self.jobs.get(p))})
        changes: list[Change] = []
        for position in chosen:
            if limit is not None and len(changes) >= limit:
                break
            self._record(position, lc.redrive(self.jobs[position], now_ms), changes)
        return changes

    # ------------------------------------------------------------ state

    def _record(
        self, position: Position, result: tuple[JobState, Transition], changes: list[Change]
    ) -> None:
        job, transition = result
        self._enter(position, job)
        changes.append((position, transition))

    @classmethod
    def rebuild(
        cls,
        settings: Settings,
        rng: random.Random,
        records: list[tuple[Position, Hashable, int]],
        changes: list[Change],
        start: dict[Position, JobState] | None = None,
        acked: int = 0,
        schedules: dict[Position, Schedule] | None = None,
        now_ms: int = 0,
    ) -> GroupCore:
        """The group as its status log tells it: `records` (position, key, timestamp)
        offered, in offset order, and `changes` read back in log order. A snapshot
        gives `start`, the jobs it kept (other records start ready), and the
        count of records `acked` before it. `schedules`: the priority and not-before
        time of the records that have either, as their headers say; `now_ms`, the
        time (records due by then are ready at once)."""
        core = cls(settings, rng)
        core._ready.advance(now_ms)
        start = start or {}
        schedules = schedules or {}
        jobs = {
            position: start.get(position) or lc.new_job(timestamp)
            for position, _, timestamp in records
        }
        core.counts[State.ACKED] = acked
        keys = {position: key for position, key, _ in records if key is not None}
        for position, transition in changes:
            if position in jobs:
                jobs[position] = lc.replay(jobs[position], transition)
            elif transition.state is _ACKED:
                core.counts[_ACKED] += 1  # its record is gone (retention): still counted
        core.keys = keys
        ordered = settings.ordering == "key"
        for position, job in jobs.items():
            core.counts[job.state] += 1
            if job.state is State.ACKED:
                keys.pop(position, None)
                continue
            core.jobs[position] = job
            key = keys.get(position)
            schedule = schedules.get(position)
            if schedule is not None and schedule[0]:
                core.priorities[position] = schedule[0]
            if job.state is State.LEASED:
                assert job.receipt is not None
                core._receipts[job.receipt] = position
                heapq.heappush(core._leases, (job.lease_until_ms, position, job.receipt))
                core._ready.holding(key)
            elif job.state is State.RETRYING:
                heapq.heappush(core._retries, (job.ready_at_ms, position))
                if ordered:
                    core._ready.holding(key)
            elif job.state is State.DEAD:
                core.dead_by_error.setdefault(group_of(job.error), {})[position] = None
        core._queue_ready(keys, schedules)
        return core

    def _queue_ready(
        self, keys: dict[Position, Hashable], schedules: dict[Position, Schedule]
    ) -> None:
        """Put the ready records of a rebuilt group in their lanes as the live group
        had them: in the order they became ready (what `oldest_ready_ms` relies on),
        a key's first-time records in offset order, a record put back at the front."""
        ready, jobs, priorities = self._ready, self.jobs, self.priorities
        fronts: list[Position] = []
        firsts: dict[Hashable, list[Position]] = {}
        again: dict[Hashable, list[Position]] = {}
        for position, job in jobs.items():
            if job.state is not State.READY:
                continue
            key = keys.get(position)
            if job.ready_at_ms == job.since_ms:  # never out since it came or was redriven
                firsts.setdefault(key, []).append(position)
            elif ready.ordered and key is not None:
                fronts.append(position)  # put back ahead of its key's other records
            else:
                again.setdefault(key, []).append(position)

        def became_ready(position: Position) -> int:
            job = jobs[position]
            schedule = schedules.get(position)
            if schedule is not None and schedule[1] is not None and job.untouched:
                return max(job.ready_at_ms, schedule[1])  # (its not-before time)
            return job.ready_at_ms

        for key, positions in firsts.items():
            new = [p for p in positions if jobs[p].lives == 0]  # offset order...
            if key is None or not ready.ordered:  # ...kept only where order is kept
                new.sort(key=became_ready)
            redriven = sorted((p for p in positions if jobs[p].lives > 0), key=became_ready)
            for position in heapq.merge(new, redriven, key=became_ready):
                schedule = schedules.get(position)
                if schedule is None:
                    ready.add(key, position)
                elif jobs[position].untouched:
                    self._add_scheduled(position, key, schedule)
                else:
                    ready.add(key, position, schedule[0])
        for position in fronts:
            ready.holding(keys[position])  # (put_back releases what it takes back)
            ready.put_back(keys[position], position, priorities.get(position, 0))
        for key, positions in again.items():
            for position in sorted(positions, key=became_ready):
                ready.add_again(key, position, priorities.get(position, 0))

    def _enter(self, position: Position, job: JobState) -> None:
        """Put a record's new state in place, and in the indexes that serve it.
        (On every transition: kept to plain dict and heap operations.)

        A record counts against its key's limits (fair.py) from the lease that takes
        it until it is finished, or, where order is not kept, until it waits to retry
        (nacked, or released for later)."""
        jobs = self.jobs
        before = jobs[position]
        state, was = job.state, before.state
        counts = self.counts
        counts[was] -= 1
        counts[state] += 1
        if before.receipt is not None and before.receipt != job.receipt:
            self._receipts.pop(before.receipt, None)
        if was is _DEAD:
            self._forget_dead(position, before.error)
        ready = self._ready
        ordered = ready.ordered
        if state is _ACKED:
            del jobs[position]
            key = self.keys.pop(position, None)
            self.priorities.pop(position, None)
            ready.release(key)
            return
        jobs[position] = job
        key = self.keys.get(position)
        if state is _LEASED:
            assert job.receipt is not None
            self._receipts[job.receipt] = position
            heapq.heappush(self._leases, (job.lease_until_ms, position, job.receipt))
            if len(self._leases) > 2 * counts[_LEASED] + 1024:
                self._prune_leases()
            if was is not _LEASED:
                ready.holding(key)
        elif state is _RETRYING:
            heapq.heappush(self._retries, (job.ready_at_ms, position))
            if len(self._retries) > 2 * counts[_RETRYING] + 1024:
                self._prune_retries()
            if not ordered:
                ready.release(key)
        elif state is _READY and was is _DEAD:
            # Redriven: behind its key's others.
            ready.add(key, position, self.priorities.get(position, 0))
        elif state is _READY and was is _RETRYING and not ordered:
            ready.add_again(key, position, self.priorities.get(position, 0))
        elif state is _READY and was is not _READY:
            ready.put_back(key, position, self.priorities.get(position, 0))
        elif state is _DEAD:
            self.dead_by_error.setdefault(group_of(job.error), {})[position] = None
            if was is not _RETRYING or ordered:
                ready.release(key)

    def _forget_dead(self, position: Position, error: str) -> None:
        group = group_of(error)
        bucket = self.dead_by_error.get(group)
        if bucket is not None:
            bucket.pop(position, None)
            if not bucket:
                del self.dead_by_error[group]

    def dead_errors(self) -> list[ErrorGroup]:
        """The groups of the errors dead records died of (error_groups.py), each with
        how many and the whole error of its first, most first."""
        jobs = self.jobs
        return sorted(
            (
                ErrorGroup(group, len(bucket), jobs[next(iter(bucket))].error)
                for group, bucket in self.dead_by_error.items()
            ),
            key=lambda found: (-found.dead, found.group),
        )

    def dead_in(self, group: str) -> dict[Position, None]:
        """The dead records of `group` (a key `dead_errors` gives, or a whole error,
        taken as its group), in the order the group learned of them."""
        bucket = self.dead_by_error.get(group)
        return bucket if bucket is not None else self.dead_by_error.get(group_of(group), {})

    def _prune_leases(self) -> None:
        """Drop heap entries of leases since settled, so the heap holds about what
        is live rather than every lease since the oldest expiry."""
        receipts = self._receipts
        self._leases = [e for e in self._leases if receipts.get(e[2]) == e[1]]
        heapq.heapify(self._leases)

    def _prune_retries(self) -> None:
        jobs = self.jobs
        live = []
        for due, position in self._retries:
            job = jobs.get(position)
            if job is not None and job.state is _RETRYING and job.ready_at_ms == due:
                live.append((due, position))
        heapq.heapify(live)
        self._retries = live

    @property
    def acked(self) -> int:
        return self.counts[State.ACKED]

    @property
    def live(self) -> int:
        """Records still to be finished: ready, leased or retrying."""
        counts = self.counts
        return counts[State.READY] + counts[State.LEASED] + counts[State.RETRYING]

    def stats(self) -> dict[str, int]:
        """Records by state: ready (to lease now), leased, retrying, dead, how many
        were acked, and how many wait for their not-before time (`delayed`)."""
        found = {state.value: count for state, count in self.counts.items()}
        found["ready"] -= self._ready.delayed
        found["delayed"] = self._ready.delayed
        return found

    def has_ready(self) -> bool:
        """Whether a lease would find a ready record (before time moves on)."""
        return self._ready.available()

    def next_due_ms(self) -> int | None:
        """When time alone next changes something (a lease ends, a retry is due, a
        delayed record or a rate-limited key may go), if ever."""
        dues = [heap[0][0] for heap in (self._leases, self._retries) if heap]
        wake = self._ready.next_wake()
        if wake is not None:
            dues.append(wake)
        return min(dues) if dues else None

    def oldest_ready_ms(self) -> int | None:
        """When the longest-waiting ready record became ready (None if none is): from
        the fronts of the ready lanes, so it costs the number of keys waiting, not of records.
        Exact when a lane's records came from one partition; where a lane gathers several
        partitions' records (those without a key), off by at most the spread in time of
        the records offered together. Records of an ordered key waiting behind one
        whose not-before time has not come are not seen until it goes."""
        jobs, not_before = self.jobs, self.not_before
        return min(
            (max(jobs[p].ready_at_ms, not_before.get(p, 0)) for p in self._ready.fronts()),
            default=None,
        )


def _ready_queue(settings: Settings) -> FairQueue[Position]:
    ordered, per_key, key_rate_per_s, rate_per_s, lower_share = choosing(settings)
    return FairQueue(
        ordered=ordered,
        per_key=per_key,
        key_rate_per_s=key_rate_per_s,
        rate_per_s=rate_per_s,
        lower_share=lower_share,
    )


def choosing(settings: Settings) -> tuple[bool, int | None, float | None, float | None, float]:
    """The settings that decide which ready record goes next (fair.py): when they
    change, the group's ready queue is built again."""
    return (
        settings.ordering == "key",
        settings.concurrency_per_key,
        settings.key_rate_limit_per_s,
        settings.rate_limit_per_s,
        settings.lower_priority_share,
    )


def _is_dead(job: JobState | None) -> bool:
    return job is not None and job.state is State.DEAD
