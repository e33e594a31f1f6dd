"""Every queue group of a broker: found in storage at start, opened on first use,
and one thread that lets time act on them (expired leases, due retries, dead
letters) even when no caller comes by."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from brook import limits, validate
from brook.errors import BrookError, NotFound
from brook.log.partition import LogSettings, PartitionLog
from brook.queue import settings as queue_settings
from brook.queue.lifecycle import Settings
from brook.queue.shell import QueueGroup

if TYPE_CHECKING:
    from brook.broker import Broker

log = logging.getLogger("brook.queue")

TICK_S_MAX = 1.0
"""The ticker looks at every group at least this often."""
STATUS_SEGMENT_BYTES_MAX = 8 * limits.MIB
"""Status-log segments stay small, so those behind a snapshot can be deleted soon."""


class QueueStore:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._groups: dict[tuple[str, str], QueueGroup] = {}
        self._mutex = threading.Lock()
        self._create_mutex = threading.Lock()
        self._stop = threading.Event()
        self.log_settings = LogSettings(
            min(broker.settings.segment_bytes_max, STATUS_SEGMENT_BYTES_MAX),
            broker.settings.segment_ms_max,
        )
        for name in broker.storage.list("queues/"):
            parts = name.split("/")
            if len(parts) != 3 or not parts[2].endswith(".json"):
                continue
            topic, group = parts[1], parts[2].removesuffix(".json")
            raw = broker.storage.read_all(name)
            if raw is None or not broker.has_topic(topic):
                continue
            settings = queue_settings.decode(raw)
            self._groups[(topic, group)] = self._open(topic, group, settings)
        self._ticker = threading.Thread(target=self._tick_loop, name="brook-queues", daemon=True)
        if not broker.read_only:  # a read-only broker lets time act on nothing
            self._ticker.start()

    def _open(self, topic: str, group: str, settings: Settings) -> QueueGroup:
        return QueueGroup(self.broker, topic, group, settings, self._open_log(topic, group))

    def _open_log(self, topic: str, group: str) -> PartitionLog:
        return PartitionLog.open(
            self.broker.storage,
            queue_settings.status_log_name(topic, group),
            0,
            self.log_settings,
            self.broker.now_ms(),
        )

    def group(self, topic: str, group: str, **given: Any) -> QueueGroup:
        """The group, created or with its settings updated by the arguments that are not None."""
        validate.topic_name(topic)
        validate.group_name(group)
        if self.broker.read_only and self.find(topic, group) is None:
            raise NotFound(f"queue group {group} of topic {topic} does not exist")
        self.broker.topic_state(topic, create=True)
        storage = self.broker.storage
        name = queue_settings.stored_name(topic, group)
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
            status_log = self.broker.committer.call(lambda: self._open_log(topic, group))
            opened = QueueGroup(self.broker, topic, group, merged, status_log)
            with self._mutex:
                self._groups[(topic, group)] = opened
            return opened

    def groups(self) -> list[QueueGroup]:
        with self._mutex:
            return list(self._groups.values())

    def find(self, topic: str, group: str) -> QueueGroup | None:
        with self._mutex:
            return self._groups.get((topic, group))

    def forget_topic(self, topic: str) -> None:
        """Writer role: the topic is being deleted; close its groups' status logs."""
        with self._mutex:
            for key in [k for k in self._groups if k[0] == topic]:
                self._groups.pop(key).status_log.close()

    def needed_by(self, topic: str, partition: int) -> Callable[[int, int], set[int]] | None:
        """For retention: which offsets of a range of `partition` the topic's queue
        groups still need (records not yet finished, dead ones included, since they
        may be redriven); None when the topic has no queue group."""
        groups = [g for g in self.groups() if g.topic == topic]
        if not groups:
            return None

        def needed(base: int, next_offset: int) -> set[int]:
            wanted: set[int] = set()
            for group in groups:
                wanted |= group.needed(partition, base, next_offset)
            return wanted

        return needed

    def maintain(self) -> None:
        """Writer role: delete status-log segments wholly behind each group's snapshot."""
        for group in self.groups():
            dropped = group.status_log.drop_before(group.snapshot_offset)
            if dropped:
                log.info(
                    "queue %s/%s: deleted %d status segments behind its snapshot",
                    group.topic,
                    group.group,
                    dropped,
                )

    def _tick_loop(self) -> None:
        while not self._stop.wait(self._pause()):
            for group in self.groups():
                if self._stop.is_set():
                    return
                due = group.core.next_due_ms()
                if (due is None or due > self.broker.now_ms()) and not group.has_unlettered():
                    continue
                try:
                    group.tick()
                except BrookError as exc:
                    log.warning("queue %s/%s: %s", group.topic, group.group, exc)

    def _pause(self) -> float:
        now = self.broker.now_ms()
        dues = [d for g in self.groups() if (d := g.core.next_due_ms()) is not None]
        if not dues:
            return TICK_S_MAX
        return min(TICK_S_MAX, max(0.005, (min(dues) - now) / 1000))

    def stop(self) -> None:
        """Stop the ticker (before the committer closes)."""
        self._stop.set()
        if self._ticker.is_alive():
            self._ticker.join()

    def close(self) -> None:
        """Close every status log (after the committer closed)."""
        for group in self.groups():
            group.status_log.close()
