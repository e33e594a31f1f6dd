"""Every queue group of a broker: found in storage at start, opened on first use
(or soon after start, by the "opening queue groups" loop: a take-over serves before
it has read every group's status log), and one supervised loop that lets time act
on them (expired leases, due retries, dead letters) even when no caller comes by.
Owns `queues/` and the status logs (layout.queue_status_log)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from brook import layout, limits, side_by_side, validate
from brook.codec.batch import Columns
from brook.commit import AppendRequest, Waiter
from brook.core import Hooks
from brook.errors import BrookError, GroupNotFound
from brook.log.partition import LogSettings, PartitionLog
from brook.name_locks import NameLocks
from brook.queue import settings as queue_settings
from brook.queue import status
from brook.queue.due import DueTimes
from brook.queue.lifecycle import Settings
from brook.queue.reader import BatchCache
from brook.queue.shell import QueueGroup
from brook.ranges import Ranges

if TYPE_CHECKING:
    from brook.core import Core

log = logging.getLogger("brook.queue")

TICK_MS = int(limits.queue_tick_s_max * 1000)
"""A group whose tick failed, or whose dead records' copy did, is tried again this late."""
STATUS_SEGMENT_BYTES_MAX = 8 * limits.MIB
"""Status-log segments stay small, so those behind a snapshot can be deleted soon."""


class QueueStore:
    def __init__(
        self, core: Core, batches_bytes_max: int = limits.queue_batches_bytes_max_default
    ) -> None:
        self.core = core
        self._groups: dict[tuple[str, str], QueueGroup] = {}
        self._stored: dict[tuple[str, str], None] = {}
        """Groups found in storage at start whose status logs are not opened yet."""
        self._opening = NameLocks()
        """Per group: its opening and its topic's deletion take turns."""
        self._opened_all = threading.Event()
        """Set once no stored group waits to be opened (or the store stops)."""
        self.batches = BatchCache(batches_bytes_max)
        """Batches read lately, shared by every group (a record is read about once)."""
        self._mutex = threading.Lock()
        self._create_mutex = threading.Lock()
        self._stop = threading.Event()
        self._dues: DueTimes[QueueGroup] = DueTimes()
        """When each group next needs the ticker (queue/due.py)."""
        self._wake = threading.Event()
        """Set when a group falls due before the ticker's planned pass."""
        self.log_settings = LogSettings(
            min(core.settings.segment_bytes_max, STATUS_SEGMENT_BYTES_MAX),
            core.settings.segment_ms_max,
        )
        try:
            stored = [
                found
                for found in map(layout.parse_queue_settings, core.storage.list(layout.QUEUES))
                if found is not None and core.has_topic(found[0])
            ]
            if core.read_only:  # it follows no group's changes: opened as they are now
                side_by_side.each(core.storage, stored, self._open_stored, self._add_opened)
            else:
                self._stored = dict.fromkeys(stored)
        except BaseException:
            self.close()
            raise
        core.register(
            Hooks(
                "queues",
                on_topic_deleted=self.forget_topic,
                maintain=self.maintain,
                retention_hold=self.needed_by,
            )
        )
        self._ticker: threading.Thread | None = None
        self._opener: threading.Thread | None = None
        if not core.read_only:  # a read-only broker lets time act on nothing
            self._ticker = core.supervisor.start("queues", self._tick, self._stop, self._sleep)
            self._opener = core.supervisor.start(
                "opening queue groups", self._open_some, self._opened_all
            )
        else:
            self._opened_all.set()

    def _open_some(self) -> float:
        """One step of the opening loop: a slice of the stored groups no call has
        opened yet, side by side; 0 (the next slice at once), having stopped when done."""
        with self._mutex:
            waiting = list(self._stored)[: limits.open_slice_groups]
        if not waiting or self._stop.is_set():
            self._opened_all.set()
            return 0.0
        side_by_side.each(self.core.storage, waiting, lambda key: self.find(*key), lambda _: None)
        return 0.0

    def _open_when_wanted(self, topic: str, group: str) -> QueueGroup | None:
        """A stored group opened now, by its first caller (others wait for it); None if
        it went meanwhile (deleted, or its topic). Raises what opening raises."""
        key = (topic, group)
        with self._opening.hold(f"{topic}\0{group}"):
            with self._mutex:
                if key not in self._stored:
                    return self._groups.get(key)
            opened = self._open_stored(key)
            with self._mutex:
                del self._stored[key]
            if opened is not None:
                self._add(opened)
            return opened

    def _open_stored(self, found: tuple[str, str]) -> QueueGroup | None:
        """A group stored before this broker opened (None if its settings went)."""
        topic, group = found
        raw = self.core.storage.read_all(layout.queue_settings(topic, group))
        return None if raw is None else self._open(topic, group, queue_settings.decode(raw))

    def _add_opened(self, group: QueueGroup | None) -> None:
        if group is not None:
            self._add(group)

    def _open(self, topic: str, group: str, settings: Settings) -> QueueGroup:
        return QueueGroup(
            self.core, topic, group, settings, self._open_log(topic, group), self.batches
        )

    def _open_log(self, topic: str, group: str) -> PartitionLog:
        return self.core.open_log(layout.queue_status_log(topic, group), 0, self.log_settings)

    def group(
        self,
        topic: str,
        group: str,
        create: bool = True,
        internal: bool = False,
        start: str = "earliest",
        **given: Any,
    ) -> QueueGroup:
        """The group, with its settings updated by the arguments that are not None;
        created (and its topic) when new, unless `create` is False: then TopicNotFound
        or GroupNotFound. A read-only broker creates nothing. `internal` allows a
        reserved group name (`__...`, the broker's own groups); a new group takes
        the topic's records from the oldest retained, or with `start="latest"` only
        those appended after it was created."""
        validate.topic_name(topic)
        validate.topic_name(group, internal=internal)
        if (self.core.read_only or not create) and self.find(topic, group) is None:
            self.core.topic_state(topic)  # TopicNotFound first: it says more
            raise GroupNotFound(f"topic {topic} has no queue group {group}")
        self.core.topic_state(topic, create=True)
        storage = self.core.storage
        name = layout.queue_settings(topic, group)
        # Creating a group waits for the committer (opening its log), and the committer's
        # maintenance takes self._mutex: so creations are serialized by a lock of their own,
        # and self._mutex is only ever held briefly.
        with self._create_mutex:
            existing = self.find(topic, group)
            if existing is not None:
                merged = queue_settings.merge(topic, existing.settings, **given)
                if merged != existing.settings:
                    storage.write_atomic(name, queue_settings.encode(merged))
                    existing.change_settings(merged)
                return existing
            raw = storage.read_all(name)
            stored = None if raw is None else queue_settings.decode(raw)
            merged = queue_settings.merge(topic, stored, **given)
            if merged != stored:
                storage.write_atomic(name, queue_settings.encode(merged))
            # The writer role opens the log (it may create a segment); reading it back is ours.
            status_log = self.core.call(lambda: self._open_log(topic, group))
            if start == "latest" and (error := self._start_at_end([(topic, status_log)])[0]):
                raise error
            opened = QueueGroup(self.core, topic, group, merged, status_log, self.batches)
            self._add(opened)
            return opened

    def create_groups(
        self, wanted: list[tuple[str, str, dict[str, Any]]], start: str = "earliest"
    ) -> list[QueueGroup | BrookError]:
        """Many broker-made (internal) groups at once, each from its topic's oldest
        record (or, with `start="latest"`, from its end): [(topic, group, settings)]
        -> the group, or why it could not be made, in order; a group that exists is
        returned as it is. Their status logs are opened in one call on the writer
        role, not one each, and their first entries made durable together: a new
        topic matched by endpoints waits for the committer once, and appends
        meanwhile wait for one short call, not for hundreds of them."""
        storage = self.core.storage
        found: list[QueueGroup | BrookError | None] = [None] * len(wanted)
        merged: dict[int, Settings] = {}
        with self._create_mutex:
            for i, (topic, group, given) in enumerate(wanted):
                existing = self.find(topic, group)
                if existing is not None:
                    found[i] = existing
                    continue
                try:
                    validate.topic_name(topic)
                    validate.topic_name(group, internal=True)
                    self.core.topic_state(topic)
                    name = layout.queue_settings(topic, group)
                    raw = storage.read_all(name)
                    stored = None if raw is None else queue_settings.decode(raw)
                    settings = queue_settings.merge(topic, stored, **given)
                    if settings != stored:
                        storage.write_atomic(name, queue_settings.encode(settings))
                    merged[i] = settings
                except BrookError as exc:
                    found[i] = exc

            def open_logs() -> dict[int, PartitionLog | BrookError]:
                opened: dict[int, PartitionLog | BrookError] = {}
                for i in merged:
                    topic, group, _ = wanted[i]
                    try:
                        opened[i] = self._open_log(topic, group)
                    except BrookError as exc:
                        opened[i] = exc
                return opened

            logs = self.core.call(open_logs) if merged else {}
            if start == "latest":
                opened = [(i, log) for i, log in logs.items() if not isinstance(log, BrookError)]
                placed = self._start_at_end([(wanted[i][0], log) for i, log in opened])
                for (i, _), error in zip(opened, placed, strict=True):
                    if error is not None:
                        logs[i] = error
            for i, status_log in logs.items():
                if isinstance(status_log, BrookError):
                    found[i] = status_log
                    continue
                topic, group, _ = wanted[i]
                made = QueueGroup(self.core, topic, group, merged[i], status_log, self.batches)
                self._add(made)
                found[i] = made
        return [x for x in found if x is not None]

    def _add(self, group: QueueGroup) -> None:
        """Serve the group, and have the ticker watch it: a read-only broker's
        groups are not watched (time acts on nothing there)."""
        with self._mutex:
            self._groups[(group.topic, group.group)] = group
        if self.core.read_only:
            return
        group.watch(self._changed)

    def _changed(self, group: QueueGroup, due_ms: int | None, unlettered: bool) -> None:
        """A group changed (QueueGroup.on_change): file its next due time. Dead
        records whose copy failed are tried again by the ticker a second on."""
        now = self.core.now_ms()
        if unlettered:
            due_ms = now + TICK_MS if due_ms is None else min(due_ms, now + TICK_MS)
        if due_ms is not None:
            due_ms = max(
                due_ms, now + limits.queue_tick_pass_ms_min
            )  # a clock stepped back: not a spin
        if self._dues.set(group, due_ms):
            self._wake.set()

    def _start_at_end(self, new: list[tuple[str, PartitionLog]]) -> list[BrookError | None]:
        """Make each new group's first status entry a snapshot that places it at its
        topic's end: every record before is finished for it. [(topic, status log)]
        -> why each could not be placed, or None; the entries are made durable together."""
        requests: list[AppendRequest | None] = []
        for topic, status_log in new:
            if status_log.durable_offset != 0:
                requests.append(None)  # made before a crash, and placed then
                continue
            ends = {p.partition: p.durable_offset for p in self.core.topic_state(topic).logs}
            snapshot = status.Snapshot(
                offered=ends, floor=dict(ends), acked=[], jobs=[], unlettered=[], acked_count=0
            )
            entry = status.encode(status.Entry(snapshot=snapshot))
            placing = AppendRequest(status_log, Columns([entry], size_bytes=len(entry)), Waiter())
            self.core.submit(placing)
            requests.append(placing)
        return [None if r is None else _failure(r) for r in requests]

    def delete_group(self, topic: str, group: str) -> bool:
        """Delete a group, its settings and its status log (whatever it had not
        finished is forgotten); whether it existed."""
        with self._create_mutex:
            with self._mutex:
                found = self._groups.pop((topic, group), None)
            if found is not None:
                self._dues.forget(found)

            def on_writer() -> None:
                self.core.log_dropped(layout.queue_status_log(topic, group))
                if found is not None:
                    found.status_log.close()
                    self.core.supervisor.forget_subject(found.subject)
                self.core.storage.delete(layout.queue_settings(topic, group))
                self.core.storage.delete_prefix(
                    layout.topic_prefix(layout.queue_status_log(topic, group))
                )
                self.core.group_deleted(topic, group)

            self.core.call(on_writer)
        return found is not None

    def groups(self, named: str = "") -> list[QueueGroup]:
        """Every group whose name starts with `named` (all by default), opening those
        not opened yet."""
        with self._mutex:
            waiting = [key for key in self._stored if key[1].startswith(named)]
        side_by_side.each(self.core.storage, waiting, lambda key: self.find(*key), lambda _: None)
        with self._mutex:
            return [g for g in self._groups.values() if g.group.startswith(named)]

    def _opened(self) -> list[QueueGroup]:
        with self._mutex:
            return list(self._groups.values())

    def find(self, topic: str, group: str) -> QueueGroup | None:
        """The group, opened now if it was stored and no call has opened it yet; None if
        the broker has no such group."""
        key = (topic, group)
        with self._mutex:
            found = self._groups.get(key)
            if found is not None or key not in self._stored:
                return found
        return self._open_when_wanted(topic, group)

    def forget_topic(self, topic: str) -> None:
        """Writer role: the topic is deleted; so are its groups and their status logs."""
        self.batches.forget(topic)
        self.core.log_dropped(layout.queue_status_log(topic, "_").rsplit("/", 1)[0])
        with self._mutex:
            stored = [key for key in self._stored if key[0] == topic]
        for key in stored:  # one being opened finishes first (and is forgotten below)
            with self._opening.hold(f"{key[0]}\0{key[1]}"), self._mutex:
                self._stored.pop(key, None)
        with self._mutex:
            for key in [k for k in self._groups if k[0] == topic]:
                gone = self._groups.pop(key)
                self._dues.forget(gone)
                gone.status_log.close()
                self.core.supervisor.forget_subject(gone.subject)
        self.core.storage.delete_prefix(layout.queues_of(topic))
        self.core.storage.delete_prefix(layout.queue_status_logs_of(topic))

    def needed_by(self, topic: str, partition: int) -> Callable[[int, int], Ranges] | None:
        """For retention: which offsets of a range of `partition` the topic's queue
        groups still need (records not yet finished, dead ones included, since they
        may be redriven); None when the topic has no queue group."""
        with self._mutex:
            unopened = any(key[0] == topic for key in self._stored)
        if unopened:  # what it needs is not known yet: all of it, until it opens
            return lambda base, next_offset: Ranges([(base, next_offset)])
        groups = [g for g in self._opened() if g.topic == topic]
        if not groups:
            return None

        def needed(base: int, next_offset: int) -> Ranges:
            wanted = Ranges()
            for group in groups:
                wanted |= group.needed(partition, base, next_offset)
            return wanted

        return needed

    def maintain(self) -> None:
        """Writer role: delete status-log segments wholly behind each group's snapshot
        (and what the lake already took of them, when it keeps their history)."""
        for group in self._opened():
            below = group.snapshot_offset
            held = self.core.status_log_hold(group.topic, group.group)
            if held is not None:
                below = min(below, held)
            dropped = group.status_log.drop_before(below)
            if dropped:
                log.info(
                    "queue %s/%s: deleted %d status segments behind its snapshot",
                    group.topic,
                    group.group,
                    dropped,
                )

    def _tick(self) -> float:
        """One pass of the ticker: let time act on the groups that are due (expired
        leases, due retries, dead records still to copy); returns the seconds until
        the next one is. A group that fails is that group's failure alone
        (Supervisor.isolate): the others go on, and it is tried again a second on."""
        supervisor = self.core.supervisor
        for group in self._dues.pop_due(self.core.now_ms()):
            if self._stop.is_set():
                return 0
            if self.find(group.topic, group.group) is not group:
                continue  # deleted, and filed again by a change racing its deletion
            ticked = False
            with supervisor.isolate("queues", group.subject, "tick"):
                group.tick()  # which files its next due time (on_change)
                ticked = True
            if not ticked:
                now_served = self.find(group.topic, group.group)
                if now_served is group:
                    self._dues.set(group, self.core.now_ms() + TICK_MS)
                elif now_served is None:  # deleted while it ticked: its failure went with it
                    supervisor.forget_subject(group.subject)
        return self._pause()

    def _pause(self) -> float:
        due = self._dues.next_ms()
        if due is None:
            return limits.queue_tick_s_max
        return min(
            limits.queue_tick_s_max,
            max(limits.queue_tick_pass_ms_min / 1000, (due - self.core.now_ms()) / 1000),
        )

    def _sleep(self, seconds: float) -> None:
        """Wait for the next pass, woken early by a group due sooner or by stop."""
        self._wake.wait(seconds)
        self._wake.clear()

    def stop(self) -> None:
        """Stop the ticker and the opening loop (before the committer closes)."""
        self._stop.set()
        self._wake.set()
        self._opened_all.set()
        for thread in (self._ticker, self._opener):
            if thread is not None:
                thread.join()

    def close(self) -> None:
        """Close every status log (after the committer closed)."""
        for group in self._opened():
            group.status_log.close()


def _failure(request: AppendRequest) -> BrookError | None:
    """Wait for a submitted append: why it failed, or None once durable."""
    assert isinstance(request.on_done, Waiter)
    request.on_done.wait()
    try:
        request.result()
    except BrookError as exc:
        return exc
    return None
