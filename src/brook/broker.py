"""The embedded broker: `brook.open(...)`.

It owns one storage location (locked), the topics in it, and the committer
thread that writes them. Topic handles and consumers are thin views over it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import msgspec

from brook import limits, validate
from brook.commit import Committer
from brook.commit.refusing import RefusingCommitter
from brook.errors import BadRequest, Closed, Conflict, ReadOnly, TopicNotFound
from brook.groups.consumer import Consumer, GroupStore
from brook.idempotency import IdempotencyIndex
from brook.log.partition import LogSettings, PartitionLog
from brook.partitioner import RoundRobin
from brook.queue import settings as queue_settings
from brook.queue.handle import Queue
from brook.queue.lifecycle import Backoff
from brook.queue.store import QueueStore
from brook.records import Ack, TopicConfig, TopicInfo
from brook.staging import plan as staging_plan
from brook.staging.service import StagingService
from brook.storage import Storage
from brook.storage.readonly import ReadOnlyStorage
from brook.timers import checks as timer_checks
from brook.timers.checks import TimerSpec
from brook.timers.model import TimerInfo
from brook.timers.service import TimerService
from brook.timers.service import new_ids as new_timer_ids
from brook.topic import Topic

log = logging.getLogger("brook")

CONFIG_FILE = "topic.json"
_decode_config = msgspec.json.Decoder(TopicConfig).decode


class TopicState:
    """A topic's settings and its open partition logs."""

    def __init__(self, name: str, config: TopicConfig, logs: list[PartitionLog]) -> None:
        self.name = name
        self.config = config
        self.logs = logs
        self.spread = RoundRobin()
        """Picks the partition of records without a key."""

    def info(self) -> TopicInfo:
        return TopicInfo(
            name=self.name,
            partitions=self.config.partitions,
            retention_ms=self.config.retention_ms,
            retention_bytes=self.config.retention_bytes,
            compaction=self.config.compaction,
            end_offsets={p.partition: p.durable_offset for p in self.logs},
        )


class Broker:
    """A broker on one storage location. Use `brook.open` to make one."""

    def __init__(
        self,
        storage: Storage,
        *,
        linger_ms: float = limits.linger_ms_default,
        batch_bytes_max: int = limits.batch_bytes_max_default,
        segment_bytes_max: int = limits.segment_bytes_max_default,
        segment_ms_max: int = limits.segment_ms_max_default,
        idempotency_window_ms: int = limits.idempotency_window_ms_default,
        clock: Callable[[], float] = time.time,
        read_only: bool = False,
    ) -> None:
        """A broker owning `storage` (locked, recovered), or with `read_only` one that
        looks at it beside its owner: nothing is locked, recovered or written, and
        every write raises ReadOnly (SPEC §0)."""
        if (
            isinstance(linger_ms, bool)
            or not isinstance(linger_ms, int | float)
            or not 0 <= linger_ms <= 10_000
        ):
            raise BadRequest(
                f"linger_ms must be a number of milliseconds from 0 to 10000, not {linger_ms!r}"
            )
        validate.whole(batch_bytes_max, "batch_bytes_max", 1, limits.batch_bytes_format_max // 2)
        validate.whole(segment_bytes_max, "segment_bytes_max", 1)
        validate.whole(segment_ms_max, "segment_ms_max", 1)
        validate.whole(idempotency_window_ms, "idempotency_window_ms", 0)
        self.read_only = read_only
        try:
            if read_only:
                storage.attach()
                storage = ReadOnlyStorage(storage)
            else:
                storage.lock()
        except BaseException:
            storage.close()  # threads or handles it may have started
            raise
        self.storage = storage
        self.clock = clock
        self.settings = LogSettings(segment_bytes_max, segment_ms_max)
        self._topics: dict[str, TopicState] = {}
        self._closed = False
        self.appended = threading.Condition()
        """Notified after every commit round, for readers waiting on new records."""
        self.round_listeners: list[Callable[[], None]] = []
        """Called (on the syncer thread) after every commit round; must be quick."""
        try:
            sweep = getattr(storage, "sweep_trash", None)
            if sweep is not None:
                sweep()
            self._recover_topics()
            self.idempotency = IdempotencyIndex(idempotency_window_ms)
            self.groups = GroupStore(self)
            self.committer: Committer | RefusingCommitter
            if read_only:
                self.committer = RefusingCommitter()
            else:
                self._rebuild_idempotency()
                self.committer = Committer(
                    self.idempotency,
                    linger_ms=linger_ms,
                    batch_bytes_max=batch_bytes_max,
                    clock=clock,
                    maintenance=self._maintenance,
                    on_round=self._wake_readers,
                )
            self.queues = QueueStore(self)
            self.timers = TimerService(self)
            self.staging = StagingService(self)
        except BaseException:
            for state in self._topics.values():
                for partition_log in state.logs:
                    partition_log.close()
            storage.close()
            raise

    # ------------------------------------------------------------ recovery

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def now_ms(self) -> int:
        """The broker's clock, in ms since the epoch."""
        return int(self.clock() * 1000)

    def _recover_topics(self) -> None:
        names = sorted(
            {n.split("/")[1] for n in self.storage.list("topics/") if n.endswith(CONFIG_FILE)}
        )
        for name in names:
            raw = self.storage.read_all(f"topics/{name}/{CONFIG_FILE}")
            assert raw is not None
            config = _decode_config(raw)
            logs = [
                PartitionLog.open(self.storage, name, p, self.settings, self._now_ms())
                for p in range(config.partitions)
            ]
            self._topics[name] = TopicState(name, config, logs)
            log.info("opened topic %s: end offsets %s", name, [p.durable_offset for p in logs])

    def _rebuild_idempotency(self) -> None:
        since = self._now_ms() - self.idempotency.window_ms
        found = []
        for state in self._topics.values():
            for partition_log in state.logs:
                for key, offset, timestamp in partition_log.scan_idempotency(since):
                    found.append((timestamp, state.name, key, partition_log.partition, offset))
        for timestamp, topic, key, partition, offset in sorted(found):
            self.idempotency.add(topic, key, Ack(partition, offset, timestamp))

    # ------------------------------------------------------------ topics

    def _check_open(self) -> None:
        if self._closed:
            raise Closed("the broker is closed")

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        compaction: bool = False,
    ) -> TopicInfo:
        """Create a topic; creating it again with the same settings is a no-op.

        Raises InvalidName, BadRequest for bad settings, Conflict if it exists
        with other settings.
        """
        self._check_open()
        validate.topic_name(name)
        config = TopicConfig(
            partitions=validate.whole(partitions, "partitions", 1, limits.partitions_max),
            retention_ms=validate.optional_whole(retention_ms, "retention_ms", 1),
            retention_bytes=validate.optional_whole(retention_bytes, "retention_bytes", 1),
            compaction=bool(compaction),
        )
        return self._ensure_topic(name, config, exact=True).info()

    def _ensure_topic(self, name: str, config: TopicConfig, exact: bool) -> TopicState:
        state = self._topics.get(name)
        if state is not None:
            if exact and state.config != config:
                raise Conflict(f"topic {name} exists with other settings: {state.config}")
            return state
        state = self.committer.call(lambda: self._create_on_writer(name, config))
        assert isinstance(state, TopicState)
        return state

    def _create_on_writer(self, name: str, config: TopicConfig) -> TopicState:
        existing = self._topics.get(name)
        if existing is not None:
            return existing
        logs = [
            PartitionLog.open(self.storage, name, p, self.settings, self._now_ms())
            for p in range(config.partitions)
        ]
        # The config is written last: a topic exists once its config is durable.
        self.storage.write_atomic(f"topics/{name}/{CONFIG_FILE}", msgspec.json.encode(config))
        state = TopicState(name, config, logs)
        self._topics = {**self._topics, name: state}
        return state

    def topics(self) -> list[TopicInfo]:
        self._check_open()
        return [state.info() for _, state in sorted(self._topics.items())]

    def delete_topic(self, name: str) -> None:
        """Delete a topic and all its records and group positions. Raises TopicNotFound."""
        self._check_open()
        validate.topic_name(name)
        self.committer.call(lambda: self._delete_on_writer(name))

    def _delete_on_writer(self, name: str) -> None:
        state = self._topics.get(name)
        if state is None:
            raise TopicNotFound(f"topic {name} does not exist")
        topics = dict(self._topics)
        del topics[name]
        self._topics = topics
        for partition_log in state.logs:
            partition_log.close()
        # The config goes first, so a crash mid-way leaves no half-topic behind.
        self.storage.delete(f"topics/{name}/{CONFIG_FILE}")
        self.storage.delete_prefix(f"topics/{name}/")
        self.storage.delete_prefix(f"groups/{name}/")
        self.queues.forget_topic(name)
        self.storage.delete_prefix(f"queues/{name}/")
        self.storage.delete_prefix(f"topics/{queue_settings.status_log_name(name, '')}")
        self.storage.delete_prefix(f"{staging_plan.ROOT}{name}/")
        self.staging.forget_topic(name)
        self.idempotency.forget_topic(name)
        self.groups.forget_topic(name)

    def has_topic(self, name: str) -> bool:
        return name in self._topics

    def topic_state(self, name: str, create: bool = False) -> TopicState:
        """The topic's state; created with defaults when `create`, else TopicNotFound."""
        self._check_open()
        state = self._topics.get(name)
        if state is not None:
            return state
        validate.topic_name(name)
        if not create:
            raise TopicNotFound(f"topic {name} does not exist")
        if self.read_only:
            raise ReadOnly(
                f"cannot create topic {name}: this broker was opened read-only (read_only=True)"
            )
        return self._ensure_topic(name, TopicConfig(), exact=False)

    def topic(self, name: str) -> Topic:
        """A handle on a topic; it is created with defaults on first write."""
        self._check_open()
        return Topic(self, validate.topic_name(name))

    def consumer(self, topic: str, group: str, start: str = "earliest") -> Consumer:
        """A member of stream group `group` on `topic`. Raises TopicNotFound."""
        self._check_open()
        return self.groups.consumer(topic, group, start)

    def queue(
        self,
        topic: str,
        group: str,
        visibility_timeout_ms: int | None = None,
        max_attempts: int | None = None,
        ordering: str | None = None,
        dead_letter_topic: str | None = None,
        backoff: Backoff | dict[str, Any] | None = None,
        expire_after_ms: int | None = None,
    ) -> Queue:
        """Queue group `group` on `topic` (the topic is created with defaults if new).

        Settings left as None keep the stored ones (the defaults of a new group).
        Raises InvalidName, BadRequest for bad settings.
        """
        self._check_open()
        return Queue(
            self.queues.group(
                topic,
                group,
                visibility_timeout_ms=visibility_timeout_ms,
                max_attempts=max_attempts,
                ordering=ordering,
                dead_letter_topic=dead_letter_topic,
                backoff=backoff,
                expire_after_ms=expire_after_ms,
            )
        )

    # ------------------------------------------------------------ timers

    def schedule(
        self,
        topic: str,
        value: bytes,
        at: int | None = None,
        delay_ms: int | None = None,
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
        timer_id: str | None = None,
    ) -> str:
        """Append a record to `topic` at `at` (ms since the epoch) or after `delay_ms`
        (now when neither is given); returns the timer's id once it is durable.

        With a `timer_id` already known (pending, or fired or cancelled within
        timer_history_ms), nothing changes and that id is returned.
        Raises BadRequest, InvalidName, RecordTooLarge, StorageError.
        """
        return self.schedule_many([TimerSpec(topic, value, at, delay_ms, key, headers, timer_id)])[
            0
        ]

    def schedule_many(self, specs: Sequence[TimerSpec]) -> list[str]:
        """Schedule many timers in one durable write; their ids, in order."""
        self._check_open()
        if len(specs) > limits.schedule_timers_max:
            raise BadRequest(f"at most {limits.schedule_timers_max} timers per call")
        now = self._now_ms()
        ids = new_timer_ids(len(specs))
        timers = timer_checks.timers(specs, now, ids)
        self.timers.schedule(timers)
        return [t.id for t in timers]

    def cancel_timer(self, timer_id: str) -> bool:
        """Cancel a pending timer, durably; False if it fired, was cancelled or is unknown."""
        self._check_open()
        return self.timers.cancel(timer_checks.timer_id(timer_id))

    def timer(self, timer_id: str) -> TimerInfo | None:
        """A timer's state: pending, fired (where), cancelled; None if unknown."""
        self._check_open()
        return self.timers.info(timer_checks.timer_id(timer_id))

    # ------------------------------------------------------------ running

    def _wake_readers(self) -> None:
        with self.appended:
            self.appended.notify_all()
        for listener in self.round_listeners:
            listener()

    def _maintenance(self) -> None:
        now = self._now_ms()
        self.idempotency.expire(now)
        self.queues.maintain()
        self.timers.maintain()
        for state in list(self._topics.values()):
            config = state.config
            if config.compaction:
                for partition_log in state.logs:
                    dropped = partition_log.compact()
                    if dropped:
                        log.info(
                            "compaction dropped %d superseded records of %s/%d",
                            dropped,
                            state.name,
                            partition_log.partition,
                        )
            if config.retention_ms is None and config.retention_bytes is None:
                continue
            for partition_log in state.logs:
                needed = self.queues.needed_by(state.name, partition_log.partition)
                removed = partition_log.enforce_retention(
                    config.retention_ms, config.retention_bytes, now, needed
                )
                if removed:
                    log.info(
                        "retention removed %d segments of %s/%d",
                        removed,
                        state.name,
                        partition_log.partition,
                    )

    def run_maintenance(self) -> None:
        """Apply retention and compaction now instead of waiting for the periodic check."""
        self._check_open()
        self.committer.call(self._maintenance)

    def close(self) -> None:
        """Answer every in-flight append, then release the storage. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.staging.stop()
        self.queues.stop()
        self.timers.stop()
        self.committer.close()
        self.queues.close()
        self.timers.close()
        self._wake_readers()
        for state in self._topics.values():
            for partition_log in state.logs:
                partition_log.close()
        self.storage.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Broker {self.storage!r}>"
