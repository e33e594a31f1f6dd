"""One queue group's state, sans I/O: records come in, leases and settlements go
through, and every change comes out as a transition for the status log.

The shell around it (not here) reads records from the topic, appends the
transitions durably, and only then answers the caller; on start it feeds the
status log back through `restore`. Time is always passed in.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Hashable, Sequence

from brook.errors import LeaseExpired
from brook.queue import lifecycle as lc
from brook.queue.fair import FairQueue
from brook.queue.lifecycle import JobState, Settings, State, Transition

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
        self._ready = FairQueue[Position](ordered=settings.ordering == "key")
        self._leases: list[tuple[int, Position, str]] = []
        """Heap of (lease end, record, receipt); stale entries are skipped."""
        self._retries: list[tuple[int, Position]] = []
        """Heap of (due, record); stale entries are skipped."""
        self._receipts: dict[str, Position] = {}
        self._serial = 0
        self.dead_by_error: dict[str, dict[Position, None]] = {}
        """The dead records by the error they died of, in the order the group learned of
        them: what the dashboard groups and pages through without a scan of every record."""

    # ------------------------------------------------------------ records

    def offer(self, position: Position, key: Hashable, timestamp_ms: int) -> None:
        """A record of the topic, new to the group: ready."""
        self.offer_many(position[0], [(position[1], key, timestamp_ms)])

    def offer_many(self, partition: int, records: Sequence[tuple[int, Hashable, int]]) -> None:
        """Records (offset, key, timestamp) of one partition, new to the group, in
        offset order: ready."""
        jobs, keys, add_many = self.jobs, self.keys, self._ready.add_many
        job = lc.new_job(-1)
        run: list[Position] = []
        run_key: Hashable = None
        for offset, key, timestamp in records:
            position = (partition, offset)
            assert position not in jobs
            if job.since_ms != timestamp:  # the records of one batch share a timestamp
                job = lc.new_job(timestamp)
            jobs[position] = job  # frozen, so records may share one
            if key is not None:
                keys[position] = key
            if key != run_key and run:
                add_many(run_key, run)
                run = []
            run_key = key
            run.append(position)
        if run:
            add_many(run_key, run)
        self.counts[_READY] += len(records)

    # ------------------------------------------------------------ time

    def tick(self, now_ms: int) -> list[Change]:
        """Expired leases end their attempt; due retries become ready."""
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
            if ages:
                expired = lc.expire(job, settings, now_ms)  # past expire_after_ms
                if expired is not None:
                    self._record(position, expired, changes)
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
            if self._ready.ordered:
                self._ready.release(key)
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
            result = lc.release(job, receipt, now_ms, reason or "released unsent")
        else:
            raise ValueError(f"unknown action {action!r}")
        self._record(position, result, changes)

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
    ) -> GroupCore:
        """The group as its status log tells it: `records` (position, key, timestamp)
        offered, in offset order, and `changes` read back in log order. A snapshot
        gives `start`, the jobs it kept (other records start ready), and the
        count of records `acked` before it."""
        core = cls(settings, rng)
        start = start or {}
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
        for position, job in jobs.items():
            core.counts[job.state] += 1
            if job.state is State.ACKED:
                keys.pop(position, None)
                continue
            core.jobs[position] = job
            key = keys.get(position)
            if job.state is State.LEASED:
                assert job.receipt is not None
                core._receipts[job.receipt] = position
                heapq.heappush(core._leases, (job.lease_until_ms, position, job.receipt))
                core._ready.holding(key)
            elif job.state is State.RETRYING:
                heapq.heappush(core._retries, (job.ready_at_ms, position))
                core._ready.holding(key)
            elif job.state is State.DEAD:
                core.dead_by_error.setdefault(job.error, {})[position] = None
        core._queue_ready(keys)
        return core

    def _queue_ready(self, keys: dict[Position, Hashable]) -> None:
        """Put the ready records of a rebuilt group in their lanes as the live group
        had them: in the order they became ready (what `oldest_ready_ms` relies on),
        a key's first-time records in offset order, a record put back at the front."""
        ready, jobs = self._ready, self.jobs
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
            return jobs[position].ready_at_ms

        for key, positions in firsts.items():
            new = [p for p in positions if jobs[p].lives == 0]  # offset order, kept
            if key is None:  # no order to keep, and partitions interleave: by time
                new.sort(key=became_ready)
            redriven = sorted((p for p in positions if jobs[p].lives > 0), key=became_ready)
            ready.add_many(key, list(heapq.merge(new, redriven, key=became_ready)))
        for position in fronts:
            ready.put_back(keys[position], position)
        for key, positions in again.items():
            for position in sorted(positions, key=became_ready):
                ready.add_again(key, position)

    def _enter(self, position: Position, job: JobState) -> None:
        """Put a record's new state in place, and in the indexes that serve it.
        (On every transition: kept to plain dict and heap operations.)"""
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
        ordered = self._ready.ordered
        if state is _ACKED:
            del jobs[position]
            key = self.keys.pop(position, None)
            if ordered:
                self._ready.release(key)
            return
        jobs[position] = job
        if state is _LEASED:
            assert job.receipt is not None
            self._receipts[job.receipt] = position
            heapq.heappush(self._leases, (job.lease_until_ms, position, job.receipt))
            if len(self._leases) > 2 * counts[_LEASED] + 1024:
                self._prune_leases()
            if ordered and was is not _LEASED:
                self._ready.holding(self.keys.get(position))
        elif state is _RETRYING:
            heapq.heappush(self._retries, (job.ready_at_ms, position))
            if len(self._retries) > 2 * counts[_RETRYING] + 1024:
                self._prune_retries()
        elif state is _READY and was is _DEAD:
            self._ready.add(self.keys.get(position), position)  # redriven: behind its key's others
        elif state is _READY and was is not _READY:
            self._ready.put_back(self.keys.get(position), position)
        elif state is _DEAD:
            self.dead_by_error.setdefault(job.error, {})[position] = None
            if ordered:
                self._ready.release(self.keys.get(position))

    def _forget_dead(self, position: Position, error: str) -> None:
        bucket = self.dead_by_error.get(error)
        if bucket is not None:
            bucket.pop(position, None)
            if not bucket:
                del self.dead_by_error[error]

    def dead_errors(self) -> list[tuple[str, int]]:
        """Each error dead records died of, with how many, most first."""
        return sorted(
            ((error, len(bucket)) for error, bucket in self.dead_by_error.items()),
            key=lambda pair: (-pair[1], pair[0]),
        )

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
        """Records by state: ready, leased, retrying, dead, and how many were acked."""
        return {state.value: count for state, count in self.counts.items()}

    def has_ready(self) -> bool:
        """Whether a lease would find a ready record (before time moves on)."""
        return self._ready.available()

    def next_due_ms(self) -> int | None:
        """When time alone next changes something (a lease ends, a retry is due), if ever."""
        dues = [heap[0][0] for heap in (self._leases, self._retries) if heap]
        return min(dues) if dues else None

    def oldest_ready_ms(self) -> int | None:
        """When the longest-waiting ready record became ready (None if none is): from
        the fronts of the ready lanes, so it costs the number of keys waiting, not of records.
        Exact when a lane's records came from one partition; where a lane gathers several
        partitions' records (those without a key), off by at most the spread in time of
        the records offered together."""
        jobs = self.jobs
        return min((jobs[p].ready_at_ms for p in self._ready.fronts()), default=None)


def _is_dead(job: JobState | None) -> bool:
    return job is not None and job.state is State.DEAD
