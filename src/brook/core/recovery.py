"""Opening a broker's storage: its topics found and opened (lazily, in slices), the
write-ahead log replayed into the partitions it names, and the idempotency keys rebuilt
from the records. Part of `Core` (brook/core/__init__.py)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec

from brook import layout, limits, side_by_side
from brook.core.topics import TopicState, open_unless_deleted
from brook.errors import (
    CorruptData,
    StorageError,
)
from brook.log.partition import LogSettings, PartitionLog
from brook.log.replay import replay
from brook.log.wal import WriteAheadLog
from brook.log.wal import recover as wal_recover
from brook.records import Ack, TopicConfig

if TYPE_CHECKING:
    from brook.core import Core

log = logging.getLogger("brook")
_decode_config = msgspec.json.Decoder(TopicConfig).decode


class Recovery:
    def _topic_names(self: Core) -> list[str]:
        """Every topic stored, by name (one without its config is skipped when opened:
        a crash while it was made). A storage that can list one level of folders
        (`folders`) is asked for those, not every file below."""
        folders = getattr(self.storage, "folders", None)
        if folders is not None:
            return sorted(folders(layout.TOPICS))  # those without a config: skipped on open
        return sorted(
            {
                n.split("/")[1]
                for n in self.storage.list(layout.TOPICS)
                if n.endswith("/" + layout.TOPIC_CONFIG_FILE)
            }
        )

    def _recover_topics(self: Core) -> None:
        def keep(state: TopicState | None) -> None:
            if state is not None:
                self._topics[state.name] = state

        side_by_side.each(self.storage, self._topic_names(), self._find_topic, keep)
        self._names = sorted(self._topics)
        if self._topics:
            log.info("found %d topics", len(self._topics))

    def _find_topic(self: Core, name: str) -> TopicState | None:
        """The stored topic, its logs not opened yet; None if its config was never written
        (a topic exists once its config is durable: a crash while it was made leaves a
        folder only). A read-only broker opens them now: it reads the owner's WAL into them."""
        raw = self.storage.read_all(layout.topic_config(name))
        if raw is None:
            return None
        state = TopicState(name, _decode_config(raw), opener=self._open_logs)
        if self.read_only:
            state.logs  # noqa: B018  (opened now)
        return state

    def _open_logs(self: Core, state: TopicState) -> list[PartitionLog]:
        """Open a stored topic's logs (TopicState.logs): once the broker serves, also
        learn their recent idempotency keys, before any append can reach them."""
        self.check_open()
        logs: list[PartitionLog] = []
        try:
            for p in range(state.config.partitions):
                logs.append(self.open_log(state.name, p))
            if self._serving and not self.read_only:
                for timestamp, key, partition, offset in self._recent_keys(logs):
                    self.idempotency.add(state.name, key, Ack(partition, offset, timestamp))
        except BaseException:
            for opened in logs:
                opened.close()
            raise
        log.debug("opened topic %s: end offsets %s", state.name, [p.durable_offset for p in logs])
        return logs

    def open_topics(self: Core) -> float:
        """Open the logs of topics no call has needed yet, a slice at a time, side by
        side (the "opening" loop after start); seconds until the next slice, or stop."""
        waiting = [state for state in self._topics.values() if not state.opened]
        if not waiting:
            self._opening_done.set()
            return 0.0
        side_by_side.each(
            self.storage, waiting[: limits.open_slice_topics], open_unless_deleted, lambda _: None
        )
        return 0.0

    def _replay_wal(self: Core, keep: bool = True) -> WriteAheadLog | None:
        """Put what the write-ahead log holds past its checkpoint into the segments,
        make them durable, and start the WAL afresh after it (log/replay.py); without
        `keep`, delete it instead (a broker that syncs each partition per round)."""
        found = wal_recover(self.storage)
        if found.problem is not None:
            log.warning(
                "write-ahead log: a round after position %d was cut short by the crash "
                "(never acknowledged): %s",
                found.end,
                found.problem,
            )

        # Logs the services own (status logs, the timer log) are opened for the replay
        # alone, and again by their service afterwards.
        others: dict[tuple[str, int], PartitionLog | None] = {}

        def find_log(topic: str, partition: int) -> PartitionLog | None:
            if topic in self._topics:
                return self._topic_log(topic, partition)  # opens the topic's logs
            if (topic, partition) not in others:
                prefix = layout.partition_prefix(topic, partition)
                stored = any(n.endswith(layout.SEGMENT_SUFFIX) for n in self.storage.list(prefix))
                others[(topic, partition)] = self.open_log(topic, partition) if stored else None
            return others[(topic, partition)]

        try:
            replayed = replay(found.entries, find_log, self.now_ms())
            for partition_log in replayed.logs:
                partition_log.sync()
        finally:
            for other in others.values():
                if other is not None:
                    other.close()
        if not keep:
            self.storage.delete_prefix(layout.WAL)
            return None
        wal = WriteAheadLog(self.storage, min(limits.wal_file_bytes_max, self._wal_bytes_max // 4))
        wal.start(found.end, self.now_ms())
        return wal

    def _read_wal(self: Core) -> None:
        """Beside an owner (read-only): what its write-ahead log holds past its checkpoint,
        read into the topics in memory, so this reader sees every record the owner had
        acknowledged when it opened (on object storage, segments hold only what the
        owner's checkpoints stored). A WAL the owner let go of meanwhile is read again."""
        for _ in range(limits.wal_read_attempts):
            try:
                found = wal_recover(self.storage)
                break
            except (CorruptData, StorageError) as exc:
                log.debug("the owner's write-ahead log changed while it was read: %s", exc)
        else:
            log.warning("the owner's write-ahead log kept changing: reading the segments only")
            return

        try:
            replay(found.entries, self._topic_log, self.now_ms())
        except CorruptData as exc:  # the owner moved on while this reader looked
            log.warning("reading the owner's write-ahead log stopped: %s", exc)

    def _topic_log(self: Core, topic: str, partition: int) -> PartitionLog | None:
        """The log of a topic's partition, or None when the topic or partition is gone."""
        state = self._topics.get(topic)
        if state is None or not 0 <= partition < state.config.partitions:
            return None
        return state.logs[partition]

    def _rebuild_idempotency(self: Core) -> None:
        """The recent idempotency keys of the topics opened while starting (those the
        write-ahead log named); every other topic's are read as its logs open."""
        found: list[tuple[int, str, bytes, int, int]] = []
        for state in self._topics.values():
            if state.opened:
                found += [(t, state.name, k, p, o) for t, k, p, o in self._recent_keys(state.logs)]
        for timestamp, topic, key, partition, offset in sorted(found):
            self.idempotency.add(topic, key, Ack(partition, offset, timestamp))
        self._serving = True

    def _recent_keys(self: Core, logs: list[PartitionLog]) -> list[tuple[int, bytes, int, int]]:
        """(timestamp, key, partition, offset) of the idempotency keys in `logs` that are
        still within the window."""
        since = self.now_ms() - self.idempotency.window_ms
        return [
            (timestamp, key, partition_log.partition, offset)
            for partition_log in logs
            for key, offset, timestamp in partition_log.scan_idempotency(since)
        ]

    def open_log(
        self: Core, topic: str, partition: int, settings: LogSettings | None = None
    ) -> PartitionLog:
        """Open (or create) one partition log. Creating writes files, so it needs the
        writer role, or for a topic not served yet, its lock (_make_topic)."""
        return PartitionLog.open(
            self.storage, topic, partition, settings or self.settings, self.now_ms()
        )
