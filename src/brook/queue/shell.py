"""One queue group at work: the I/O shell around `GroupCore`.

It feeds the core the topic's durable records (a bounded window of them),
turns calls into core transitions, and appends those to the group's status
log through the committer *before* answering: a lease, ack or nack a caller
hears of is durable, and the state after a crash is the fold of the log.

Under the group's mutex the core changes and the status entry is submitted to
the committer, so entries reach the log in the order the core made them and
group commit batches the entries of concurrent callers into one sync. Callers
wait for durability outside the mutex. If an entry fails to become durable,
the in-memory state is no longer the log's: the group is rebuilt from the log
before its next call.

Records that die are copied to the dead-letter topic after their DEAD
transition is durable, with an idempotency key naming the death, and an entry
then marks them copied; a restart copies again whatever was not marked, and
the key keeps that from appending twice.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import random
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING

import msgspec

from brook import limits
from brook.codec.batch import Columns
from brook.commit import AppendRequest, Waiter
from brook.errors import LeaseExpired, TopicNotFound
from brook.log.partition import PartitionLog
from brook.models import Outcome, State
from brook.queue import replay, status
from brook.queue.dead_letters import DeadLetters
from brook.queue.group import Change, GroupCore, Position, choosing
from brook.queue.inspection import Inspection
from brook.queue.lifecycle import FINISHED, JobState, Settings, replayed
from brook.queue.reader import BatchCache, RecordReader
from brook.queue.redelivery import Redelivery
from brook.queue.replay import Replay
from brook.queue.results import Kept, Results
from brook.queue.snapshots import Snapshots
from brook.queue.unique import UniqueIndex, UniqueRecords
from brook.records import Job, Record
from brook.scheduling import Schedule

if TYPE_CHECKING:
    from brook.core import Core

log = logging.getLogger("brook.queue")

ACTIONS = ("ack", "nack", "extend", "discard", "release")
"""What `settle` does; `release` (a lease given back unused) is the delivery loop's own."""


class QueueGroup(Inspection, DeadLetters, Snapshots, Redelivery, UniqueRecords):
    def __init__(
        self,
        core: Core,
        topic: str,
        group: str,
        settings: Settings,
        status_log: PartitionLog,
        batches: BatchCache,
    ) -> None:
        self.core = core
        self.topic = topic
        self.group = group
        self.settings = settings
        self.status_log = status_log
        self.mutex = threading.Lock()
        self._reader = RecordReader(topic, lambda: core.topic_state(topic).logs, batches)
        self._letter_mutex = threading.Lock()
        self._rng = random.Random()
        self.machine = GroupCore(settings, self._rng)
        self.on_change: Callable[[QueueGroup, int | None, bool], None] = _unwatched
        """Told, holding the mutex, after each change: (group, next due ms, whether dead
        records wait for their dead-letter copy). The store's ticker keeps its due times so."""
        self.offered: dict[int, int] = {}
        """Per partition, the next offset of the topic not yet given to the machine."""
        self.replaying: dict[int, list[Replay]] = {}
        """Per partition, the replays under way, apart, in offset order (queue/replay.py)."""
        self._unlettered: dict[Position, int] = {}
        """Dead records whose dead-letter copy is not known durable: the death's at_ms."""
        self.results = Results()
        self._finishing: dict[Position, AppendRequest] = {}
        """Jobs whose ack or death is in a status-log entry not known durable yet."""
        self.finish_feed: list[Position] | None = None
        """When a list (the joins watch the group, brook/joins): every job acked or
        killed is added to it, to look at once its entry is durable (`finished`)."""
        self.generation = 0
        """Counts rebuilds from the log (`_load`): what a watcher saw before may be gone."""
        self.unique = UniqueIndex()
        """Identities of the live unique records (queue/unique.py)."""
        self._changes_since_snapshot: int = 0
        self.snapshot_offset: int = 0
        """Status-log offset of the newest durable snapshot: nothing before it is needed."""
        self._broken = False
        self._next_partition = 0
        self._load()

    @property
    def subject(self) -> str:
        """The group as its failures are shown (Supervisor.isolate)."""
        return f"queue group {self.topic}/{self.group}"

    def _now_ms(self) -> int:
        return self.core.now_ms()

    def next_due_ms(self) -> int | None:
        """When time next changes something in the group (a lease expires, a retry
        is due), or None."""
        with self.mutex:
            return self.machine.next_due_ms()

    def watch(self, on_change: Callable[[QueueGroup, int | None, bool], None]) -> None:
        """Tell `on_change` of every change from now on, and of the present at once."""
        with self.mutex:
            self.on_change = on_change
            on_change(self, self.machine.next_due_ms(), bool(self._unlettered))

    # ------------------------------------------------------------ rebuilding

    def _load(self) -> None:
        """Rebuild the core from the status log and the topic (holding the mutex, or alone)."""
        self._finishing = {}  # what is read back is durable
        self.generation += 1
        self.unique.reset()
        snapshot, snapshot_offset, changes, unlettered = status.fold(self._entries())
        logs = self.core.topic_state(self.topic).logs
        floor = {pl.partition: pl.start_offset for pl in logs}
        offered = dict(floor)
        start: dict[Position, JobState] = {}
        acked_runs: dict[int, list[tuple[int, int]]] = {}
        acked = 0
        if snapshot is not None:
            for p in floor:
                floor[p] = max(floor[p], snapshot.floor.get(p, 0))
                offered[p] = max(floor[p], snapshot.offered.get(p, 0))
            for p, first, stop in snapshot.acked:
                acked_runs.setdefault(p, []).append((first, stop))
            start = {(p, o): job for p, o, job in snapshot.jobs}
            acked = snapshot.acked_count
        reach = dict(offered)
        replaying: dict[int, list[Replay]] = {}
        for row in snapshot.replaying if snapshot else ():
            p, under_way = replay.from_row(row)
            replaying.setdefault(p, []).append(under_way)
        # A replay brought back every record it covers up to the last one with a
        # change since the snapshot (queue/replay.py).
        brought = {(p, r.next): r.next for p, rs in replaying.items() for r in rs}
        for (p, o), _ in changes:
            if p in reach:
                reach[p] = max(reach[p], o + 1)
            for r in replaying.get(p, ()):
                if r.covers(o) and o >= brought[(p, r.next)]:
                    brought[(p, r.next)] = o + 1
        records: list[tuple[Position, Hashable, int]] = []
        schedules: dict[Position, Schedule] = {}
        for pl in logs:
            p = pl.partition
            runs = acked_runs.get(p, [])
            scheduled: dict[int, Schedule] = {}
            rows = self._keys_range(pl, floor[p], reach[p], scheduled)
            rows = [r for r in rows if not (runs and r[0] < offered[p] and _within(runs, r[0]))]
            for r in replaying.get(p, ()):
                again = self._keys_range(
                    pl, max(r.next, pl.start_offset), brought[(p, r.next)], scheduled
                )
                again = [row for row in again if r.covers(row[0])]
                start.update({(p, row[0]): replayed(r.at_ms) for row in again})
                rows = sorted(rows + again)
            for o, key, timestamp in rows:
                records.append(((p, o), key, timestamp))
                if o in scheduled:
                    schedules[(p, o)] = scheduled[o]
        found = {position for position, _, _ in records}
        lost = sum(1 for position in start if position not in found)
        if lost:
            log.warning(
                "queue %s/%s: %d unfinished records were removed by the topic's retention",
                self.topic,
                self.group,
                lost,
            )
        self.machine = GroupCore.rebuild(
            self.settings, self._rng, records, changes, start, acked, schedules, self._now_ms()
        )
        self.offered = reach
        self.replaying = {}
        for p, rs in replaying.items():
            left = [r.advanced(brought[(p, r.next)]) for r in rs]
            if any(left):
                self.replaying[p] = [r for r in left if r is not None]
        self._unlettered = {pos: at for pos, at in unlettered.items() if pos in self.machine.jobs}
        self.results = Results()
        if snapshot is not None:
            for p, o, at, attempt, result in snapshot.results:
                self.results.add((p, o), Kept(at, attempt, result))
        self._keep_results(changes)
        self.results.expire(self._now_ms())
        self._changes_since_snapshot = len(changes)
        self.snapshot_offset = snapshot_offset
        self._broken = False

    def _entries(self) -> Iterable[tuple[int, status.Entry]]:
        """(offset, entry) of the status log, oldest first."""
        offset = self.status_log.start_offset
        while True:
            records = self.status_log.read(offset, limits.read_records_max)
            if not records:
                return
            for record in records:
                yield record.offset, status.decode(record.value)
            offset = records[-1].offset + 1

    @staticmethod
    def _keys_range(
        partition_log: PartitionLog, start: int, stop: int, schedules: dict[int, Schedule]
    ) -> list[tuple[int, bytes | None, int]]:
        """(offset, key, timestamp) of the records from `start` to before `stop`, and
        into `schedules` the priorities and not-before times of those that have them."""
        out: list[tuple[int, bytes | None, int]] = []
        while start < stop:
            got = partition_log.read_keys(
                start, min(stop - start, limits.read_records_max), schedules
            )
            got = [item for item in got if item[0] < stop]
            if not got:
                break
            out.extend(got)
            start = got[-1][0] + 1
        return out

    def _fetch(self, positions: list[Position]) -> list[Record]:
        """The records at `positions` (sorted); missing ones are left out."""
        return self._reader.records(positions)

    def _check_usable(self) -> None:
        """Holding the mutex: rebuild first if an entry failed to become durable."""
        self.core.check_open()
        if self._broken:
            log.warning("queue %s/%s: rebuilding from its status log", self.topic, self.group)
            self._load()

    # ------------------------------------------------------------ the topic

    def _offer(self) -> None:
        """Give the core the topic's new durable records, while the window has room
        (a replay under way takes half of it first, so new records keep flowing, and
        whatever new records leave)."""
        room = limits.queue_window_records_max - self.machine.live
        logs = self.core.topic_state(self.topic).logs
        if self.replaying and room > 1:
            room -= self._offer_again(logs, room // 2)
        progressed = True
        while room > 0 and progressed:
            progressed = False
            for step in range(len(logs)):
                partition_log = logs[(self._next_partition + step) % len(logs)]
                p = partition_log.partition
                start = max(self.offered.get(p, 0), partition_log.start_offset)
                if start >= partition_log.durable_offset or room <= 0:
                    continue
                share = max(1, min(room, limits.read_records_max) // len(logs))
                schedules: dict[int, Schedule] = {}
                found = partition_log.read_keys(start, share, schedules)
                if not found:
                    continue
                self.machine.offer_many(p, found, schedules)
                self.offered[p] = found[-1][0] + 1
                room -= len(found)
                progressed = True
            self._next_partition = (self._next_partition + 1) % len(logs)
        if self.replaying and room > 0:
            self._offer_again(logs, room)

    def _offer_again(self, logs: list[PartitionLog], room: int) -> int:
        """Give the core up to `room` acked records that replays bring back; how many."""
        given = 0
        jobs = self.machine.jobs
        for p, under_way in sorted(self.replaying.items()):
            left: list[Replay] = []
            for r in under_way:
                cursor: Replay | None = r
                while cursor is not None and given < room and p < len(logs):
                    start = max(cursor.next, logs[p].start_offset)
                    schedules: dict[int, Schedule] = {}
                    want = min(room - given, limits.read_records_max, cursor.stop - start)
                    found = [
                        row
                        for row in logs[p].read_keys(start, want, schedules)
                        if row[0] < cursor.stop
                    ]
                    end = found[-1][0] + 1 if found else cursor.stop  # (none: retention took them)
                    again = [
                        row for row in found if cursor.covers(row[0]) and (p, row[0]) not in jobs
                    ]
                    if again:
                        self.machine.offer_many(p, again, schedules, replayed_at_ms=cursor.at_ms)
                        given += len(again)
                    cursor = cursor.advanced(end)
                if cursor is not None and p < len(logs):
                    left.append(cursor)
            if left:
                self.replaying[p] = left
            else:
                del self.replaying[p]
        return given

    def since_ms(self, partition: int, offset: int) -> int | None:
        """When the group first saw the record at (partition, offset), for its
        `expire_after_ms` (a redrive or replay starts it afresh); None when the group
        holds no such record. Takes no lock, so the delivery loop may ask it of a record
        it holds leased (no other change to it can be under way): one lookup of a state
        that is replaced, never changed in place."""
        job = self.machine.jobs.get((partition, offset))
        return None if job is None else job.since_ms

    def has_work(self) -> bool:
        """Whether a lease now might hand something out (a cheap, racy hint)."""
        if self.machine.has_ready():
            return True
        if self.machine.live >= limits.queue_window_records_max:
            return False
        if self.replaying:
            return True
        logs = self.core.topic_state(self.topic).logs
        return any(pl.durable_offset > self.offered.get(pl.partition, 0) for pl in logs)

    # ------------------------------------------------------------ the log

    def _submit(
        self,
        changes: list[Change],
        lettered: list[tuple[int, int, int]] | None = None,
        snapshot: status.Snapshot | None = None,
        on_done: Callable[[AppendRequest], None] | None = None,
    ) -> AppendRequest:
        """Holding the mutex: queue the entry for the status log; wait on it with
        `_wait` (or have `on_done` called on the committer's thread)."""
        unlettered = self._unlettered
        dead = State.DEAD
        rows = []
        for (p, o), transition in changes:
            rows.append((p, o, transition))
            if transition.state is dead:
                unlettered[(p, o)] = transition.at_ms
            elif unlettered and (p, o) in unlettered:
                del unlettered[(p, o)]
        self._keep_results(changes)
        entry = status.Entry(rows, lettered or [], snapshot)
        value = status.encode(entry)
        request = AppendRequest(
            self.status_log, Columns([value], size_bytes=len(value)), on_done or Waiter()
        )
        self._note_finishing(changes, request)
        self.core.submit(request)
        self._changes_since_snapshot += len(changes)
        self.on_change(self, self.machine.next_due_ms(), bool(unlettered))
        return request

    def _note_finishing(self, changes: list[Change], request: AppendRequest) -> None:
        """Holding the mutex: remember which entry finishes which job, so `finished`
        tells a job done only once that entry is durable."""
        finishing = self._finishing
        if len(finishing) >= limits.queue_finishing_prune:
            for position in [p for p, r in finishing.items() if r.answered]:
                del finishing[position]
        feed = self.finish_feed
        unique = self.unique
        for position, transition in changes:
            if transition.state in FINISHED:
                finishing[position] = request
                unique.ended(position)
                if feed is not None:
                    feed.append(position)

    def _keep_results(self, changes: list[Change]) -> None:
        """Keep the results acks carry (queue/results.py)."""
        acked = State.ACKED
        for position, t in changes:
            if t.state is acked and t.outcome is not None and t.outcome.result is not None:
                self.results.add(position, Kept(t.at_ms, t.attempt, t.outcome.result))

    def _wait(self, request: AppendRequest) -> int:
        """Wait for an entry to be durable; its status-log offset. On failure the
        group is rebuilt from the log before its next call, and the error raised."""
        assert isinstance(request.on_done, Waiter)
        request.on_done.wait()
        try:
            return request.result()[0].offset
        except BaseException:
            self._broken = True
            raise

    def _after(self, request: AppendRequest | None, changes: list[Change]) -> None:
        """Wait for the entry, then copy new deaths to the dead-letter topic."""
        if request is not None:
            self._wait(request)
        if self._unlettered:
            self.letter_dead_isolated()

    # ------------------------------------------------------------ calls

    def lease(self, count: int, timeout_s: float, visibility_ms: int | None) -> list[Job]:
        """Up to `count` records, waiting up to `timeout_s` for one to be available."""
        monotonic = self.core.clock.monotonic
        deadline = monotonic() + timeout_s
        while True:
            leased = self._lease_now(count, visibility_ms)
            remaining = deadline - monotonic()
            if leased or remaining <= 0 or self.core.closed:
                return leased
            due = self.next_due_ms()
            if due is not None:
                remaining = min(remaining, max(0.001, (due - self._now_ms()) / 1000))
            self.core.wait_for_records(self.has_work, remaining)

    def _lease_now(self, count: int, visibility_ms: int | None) -> list[Job]:
        with self.mutex:
            self._check_usable()
            self._offer()
            changes = self.machine.lease(self._now_ms(), count, visibility_ms)
            if not changes:
                return []
            request = self._submit(changes)
            leases = [(pos, t) for pos, t in changes if t.state is State.LEASED]
            self._maybe_snapshot()
        self._after(request, changes)
        records = {
            (r.partition, r.offset): r for r in self._fetch(sorted(pos for pos, _ in leases))
        }
        gone = [t.receipt for pos, t in leases if pos not in records]
        if gone:
            self._vanished([r for r in gone if r is not None])
        out = []
        for pos, t in leases:
            found = records.get(pos)
            if found is not None and t.receipt is not None:
                out.append(Job(found, t.attempt, t.receipt))
        return out

    def _vanished(self, receipts: list[str]) -> None:
        """Leased records the topic's retention removed meanwhile: dead, with why."""
        log.warning(
            "queue %s/%s: %d leased records were removed by the topic's retention",
            self.topic,
            self.group,
            len(receipts),
        )
        # A lease that expired meanwhile is found gone again by the next lease.
        with contextlib.suppress(LeaseExpired):
            self.settle(receipts, "discard", reason="removed by the topic's retention")

    def settle(
        self,
        receipts: list[str],
        action: str,
        reason: str = "",
        delay_ms: int | None = None,
        extend_ms: int = 0,
        outcome: Outcome | dict[str, Outcome] | None = None,
    ) -> None:
        """Apply `action` to every live receipt, durably; then raise LeaseExpired
        naming the receipts that were not live (the others are settled). `outcome`
        (how the attempt went; or one per receipt) is kept with the transitions that
        end the attempts."""
        self.settle_begin(receipts, action, reason, delay_ms, extend_ms, outcome).finish()

    def settle_begin(
        self,
        receipts: list[str],
        action: str,
        reason: str = "",
        delay_ms: int | None = None,
        extend_ms: int = 0,
        outcome: Outcome | dict[str, Outcome] | None = None,
    ) -> Settling:
        """`settle`, its entry queued for the status log without waiting: `finish()`
        waits for it (and raises as `settle` does). A caller settling in many groups
        queues them all first, so one commit round makes them durable together."""
        assert action in ACTIONS
        with self.mutex:
            self._check_usable()
            now = self._now_ms()
            changes, stale = self.machine.settle_many(
                now, receipts, action, reason, delay_ms, extend_ms
            )
            if outcome is not None:
                if isinstance(outcome, dict):
                    told = {_position_of(r): o for r, o in outcome.items()}
                else:
                    told = dict.fromkeys((_position_of(r) for r in receipts), outcome)
                changes = [
                    (position, msgspec.structs.replace(t, outcome=told[position]))
                    if position in told and t.state in _ENDS_ATTEMPT
                    else (position, t)
                    for position, t in changes
                ]
            request = self._submit(changes) if changes else None
            self._maybe_snapshot()
        return Settling(self, request, changes, stale, len(receipts), action)

    def tick(self) -> None:
        """Let time act: expired leases end their attempt, due retries become ready."""
        with self.mutex:
            self._check_usable()
            changes = self.machine.tick(self._now_ms())
            request = self._submit(changes) if changes else None
            if request is None:  # (a submit tells on_change itself)
                self.on_change(self, self.machine.next_due_ms(), bool(self._unlettered))
        self._after(request, changes)

    def redrive(self, limit: int | None, positions: list[Position] | None = None) -> int:
        """Dead records (all, or those at `positions`) back to work, oldest first;
        returns how many. Idempotent."""
        with self.mutex:
            self._check_usable()
            changes = self.machine.redrive(self._now_ms(), limit, positions)
            request = self._submit(changes) if changes else None
        self._after(request, changes)
        return len(changes)

    def cancel(
        self, positions: list[Position] | None, key: bytes | None, reason: str
    ) -> list[Position]:
        """Cancel the waiting records of `positions`, or every one of `key`, durably
        (GroupCore.cancel); the positions cancelled."""
        with self.mutex:
            self._check_usable()
            self._offer()
            if positions is None:
                positions = sorted(p for p, k in self.machine.keys.items() if k == key)
            changes, cancelled = self.machine.cancel(self._now_ms(), positions, reason)
            request = self._submit(changes) if changes else None
            self._maybe_snapshot()
        self._after(request, changes)
        return cancelled

    def change_settings(self, settings: Settings) -> None:
        """Use new settings (already stored); a change of how records are chosen
        (ordering, limits, priorities' share) rebuilds the lanes."""
        with self.mutex:
            reorder = choosing(settings) != choosing(self.settings)
            self.settings = settings
            self.machine.settings = settings
            if reorder:
                self._load()
            self.on_change(self, self.machine.next_due_ms(), bool(self._unlettered))


class Settling:
    """A settling queued for its group's status log (QueueGroup.settle_begin)."""

    def __init__(
        self,
        group: QueueGroup,
        request: AppendRequest | None,
        changes: list[Change],
        stale: list[str],
        count: int,
        action: str,
    ) -> None:
        self.group = group
        self._request = request
        self._changes = changes
        self._stale = stale
        self._count = count
        self._action = action

    def finish(self) -> None:
        """Wait until the settling is durable; then raise LeaseExpired naming the
        receipts that were not live (the others are settled)."""
        self.group._after(self._request, self._changes)
        stale = self._stale
        if stale:
            shown = ", ".join(stale[:5]) + (", ..." if len(stale) > 5 else "")
            settled = self._count - len(stale)
            rest = f"; the other {settled} were settled ({self._action})" if settled else ""
            raise LeaseExpired(
                f"{len(stale)} of {self._count} receipts are no longer live (the lease expired, "
                f"or the record was settled or leased again): {shown}{rest}"
            )


def _unwatched(group: QueueGroup, due_ms: int | None, unlettered: bool) -> None:
    """No ticker watches the group (a read-only broker's, or one being built)."""


def _within(runs: list[tuple[int, int]], offset: int) -> bool:
    """Whether `offset` falls in one of `runs` ((first, after last), sorted, apart)."""
    i = bisect.bisect_right(runs, (offset, float("inf"))) - 1
    return i >= 0 and runs[i][0] <= offset < runs[i][1]


_ENDS_ATTEMPT = (State.ACKED, State.RETRYING, State.DEAD)


def _position_of(receipt: str) -> Position:
    """The (partition, offset) a receipt names (partition.offset.attempt.serial.token)."""
    partition, offset, _ = receipt.split(".", 2)
    return int(partition), int(offset)


def backlog_of(groups: Iterable[QueueGroup]) -> int:
    """Records still to be finished in `groups` (ready, delayed ones too, leased or
    retrying), those not yet read from their topics too: what their `counts` add up
    to, for a look at thousands of groups at once (/metrics' delivery backlog). Reads
    nothing and writes nothing; each topic's ends are read once, and a group's lock is
    taken only while a replay is under way, so a figure is as racy as a scrape's look."""
    ready, leased, retrying = State.READY, State.LEASED, State.RETRYING
    ends: dict[str, list[tuple[int, int, int]]] = {}
    total = 0
    for group in groups:
        counts = group.machine.counts
        total += counts[ready] + counts[leased] + counts[retrying]
        topic = ends.get(group.topic)
        if topic is None:
            try:
                logs = group.core.topic_state(group.topic).logs
            except TopicNotFound:  # deleted since the groups were listed
                logs = []
            topic = ends[group.topic] = [
                (pl.partition, pl.start_offset, pl.durable_offset) for pl in logs
            ]
        offered = group.offered
        for partition, start, end in topic:
            read = max(offered.get(partition, 0), start)
            if end > read:
                total += end - read
        if group.replaying:
            with group.mutex:
                total += group._replay_waiting(group.core.topic_state(group.topic).logs)
    return total
