"""The embedded broker: `brook.open(...)`, a small façade over the core and its services.

It builds the parts in order — the core (storage, clock, committer, topics),
then stream groups, queue groups, timers, staged writes, endpoints and the
delivery loop, each on the core —
and closes them in reverse: services stop their threads, the core answers
every in-flight append and stops writing, services close their logs, the core
releases the storage. If opening fails half-way, what was started is closed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import msgspec

from brook import limits, validate
from brook import value_schema as value_schemas
from brook.broker.endpoints import EndpointCalls
from brook.broker.reads import ReadModels
from brook.clock import Clock
from brook.core import Core, Hooks, TopicState
from brook.delivery.addresses import Resolver, reach, system_resolver
from brook.delivery.event_types import EventTypes
from brook.delivery.service import Deliverer
from brook.delivery.store import EndpointStore
from brook.delivery.summary import Chosen
from brook.errors import (
    BadRequest,
    LakeOff,
    TopicNotFound,
)
from brook.groups.consumer import Consumer, GroupStore
from brook.joins.service import JoinService
from brook.lake.status import LakeWatch, lake_topics
from brook.log.partition import LogSettings
from brook.models import Backoff, TimerInfo, TimerPage, TimerSpec
from brook.queue.handle import Queue
from brook.queue.store import QueueStore
from brook.records import (
    JoinInfo,
    JoinSpec,
    LakeStatus,
    ScheduleInfo,
    TopicConfig,
    TopicInfo,
)
from brook.schedules.service import ScheduleService, spec_of
from brook.staging.service import StagingService
from brook.storage import Storage
from brook.supervisor import Supervisor
from brook.timers import checks as timer_checks
from brook.timers.model import cursor_of, parse_cursor
from brook.timers.service import TimerService
from brook.timers.service import new_ids as new_timer_ids
from brook.topic import Topic

if TYPE_CHECKING:
    from brook.lake.manifest import Manifest
    from brook.lake.service import LakeService

log = logging.getLogger("brook")

__all__ = ["Broker", "TopicState"]


class Service(Protocol):
    def stop(self) -> None:
        """Stop the service's threads (before the committer closes)."""

    def close(self) -> None:
        """Close what the service holds open (after the committer closed)."""


S = TypeVar("S", bound=Service)


class Broker(EndpointCalls, ReadModels):
    """A broker on one storage location. Use `brook.open` to make one."""

    EMBEDDED_ONLY = frozenset(
        {name for name, part in vars(ReadModels).items() if callable(part) and name[0] != "_"}
        | {"join_settled", "joins_idle", "portal_key"}
    )
    """Read models and the event loop's bridge for the shells in this process (server,
    dashboard, /metrics); remote clients see the same state through the HTTP API."""

    def __init__(
        self,
        storage: Storage,
        *,
        linger_ms: float = limits.linger_ms_default,
        batch_bytes_max: int = limits.batch_bytes_max_default,
        segment_bytes_max: int = limits.segment_bytes_max_default,
        segment_ms_max: int = limits.segment_ms_max_default,
        idempotency_window_ms: int = limits.idempotency_window_ms_default,
        record_bytes_max: int = limits.record_bytes_max_default,
        clock: Clock | Callable[[], float] = time.time,
        read_only: bool = False,
        delivery_allow_private_networks: bool = False,
        delivery_allow_networks: str | Sequence[str] | None = None,
        delivery_resolver: Resolver = system_resolver,
        delivery_workers: int = 0,
        metrics_endpoints: Iterable[str] = (),
        lake: bool = False,
        lake_lag_ms: int = limits.lake_lag_ms_default,
        checkpoint_interval_ms: int = limits.checkpoint_interval_ms_default,
        wal_bytes_max: int = limits.wal_bytes_max_default,
        queue_batches_bytes_max: int = limits.queue_batches_bytes_max_default,
    ) -> None:
        """A broker owning `storage` (locked, recovered), or with `read_only` one that
        looks at it beside its owner: nothing is locked, recovered or written, and
        every write raises ReadOnly (SPEC §0). Delivery calls only public addresses
        unless `delivery_allow_private_networks` (never a metadata address), within
        `delivery_allow_networks` when given (CIDRs; a metadata address only when one
        of them is exactly it: delivery/addresses.py); `delivery_resolver` resolves
        endpoints' hosts (tests give a fake one); `delivery_workers` processes send
        the attempts (0: the broker's own delivery loop does); `metrics_endpoints`
        (names or glob patterns) are the endpoints /metrics gives series of their own
        while they are healthy too (delivery_summary). With `lake`, every topic
        is also written as Parquet under `lake/`, an active segment's records within
        `lake_lag_ms` (brook/lake/). The queue groups keep batches they read for each
        other within `queue_batches_bytes_max` (queue/reader.py)."""
        if (
            isinstance(linger_ms, bool)
            or not isinstance(linger_ms, int | float)
            or not 0 <= linger_ms <= limits.linger_ms_max
        ):
            raise BadRequest(
                "linger_ms must be a number of milliseconds from 0 to "
                f"{limits.linger_ms_max}, not {linger_ms!r}"
            )
        validate.whole(batch_bytes_max, "batch_bytes_max", 1, limits.batch_bytes_format_max // 2)
        validate.whole(segment_bytes_max, "segment_bytes_max", 1)
        validate.whole(segment_ms_max, "segment_ms_max", 1)
        validate.whole(idempotency_window_ms, "idempotency_window_ms", 0)
        validate.whole(record_bytes_max, "record_bytes_max", 1, limits.record_bytes_max_ceiling)
        validate.whole(delivery_workers, "delivery_workers", 0, limits.delivery_workers_max)
        validate.whole(lake_lag_ms, "lake_lag_ms", 0, limits.lake_lag_ms_max)
        validate.whole(
            checkpoint_interval_ms,
            "checkpoint_interval_ms",
            limits.checkpoint_interval_ms_min,
            limits.checkpoint_interval_ms_max,
        )
        validate.whole(wal_bytes_max, "wal_bytes_max", limits.wal_bytes_max_min)
        validate.whole(
            queue_batches_bytes_max,
            "queue_batches_bytes_max",
            0,
            limits.queue_batches_bytes_max_ceiling,
        )
        self._metrics_chosen = Chosen(metrics_endpoints)
        if delivery_workers and delivery_resolver is not system_resolver:
            raise BadRequest("delivery_resolver is this process's: it takes delivery_workers=0")
        delivery_reach = reach(bool(delivery_allow_private_networks), delivery_allow_networks)
        clock = Clock.of(clock)
        self.supervisor = Supervisor(clock)
        self.core = Core(
            storage,
            clock=clock,
            settings=LogSettings(segment_bytes_max, segment_ms_max),
            supervisor=self.supervisor,
            linger_ms=linger_ms,
            batch_bytes_max=batch_bytes_max,
            idempotency_window_ms=idempotency_window_ms,
            record_bytes_max=record_bytes_max,
            read_only=read_only,
            checkpoint_interval_ms=checkpoint_interval_ms,
            wal_bytes_max=wal_bytes_max,
        )
        self._services: list[Service] = []
        self._closed = False
        try:
            self.groups = self._started(GroupStore(self.core))
            self.queues = self._started(QueueStore(self.core, queue_batches_bytes_max))
            self.timers = self._started(TimerService(self.core, start=False))
            self.schedules = self._started(ScheduleService(self.core, self.timers))
            self.joins = self._started(JoinService(self.core, self.queues))
            self.timers.start()  # once the schedules skipped what they were down over
            self.staging = self._started(StagingService(self.core))
            self.endpoint_store = self._started(
                EndpointStore(self.core, self.queues, delivery_reach)
            )
            self._catalog = EventTypes(self.core.storage, read_only)
            self.delivery = self._started(
                Deliverer(self.core, self.endpoint_store, delivery_resolver, delivery_workers)
            )
            self._lake_lag_ms = lake_lag_ms
            self._lake_starting = threading.Lock()
            self._lake_watch = LakeWatch(self.core.storage, self._lake_committed)
            self.core.register(
                Hooks(
                    "lake-watch",
                    on_topic_deleted=self._lake_watch.forget,
                    on_group_deleted=self._lake_watch.forget,
                )
            )
            wanted = lake or any(s.config.lake for s in self.core.topic_states())
            self.lake = (
                self._started(_lake_writer(self.core, lake_lag_ms, lake))
                if wanted and not read_only
                else None
            )
        except BaseException:
            self._close_parts()
            raise

    def _started(self, service: S) -> S:
        self._services.append(service)
        return service

    # ------------------------------------------------------------ the core

    @property
    def storage(self) -> Storage:
        return self.core.storage

    @property
    def read_only(self) -> bool:
        return self.core.read_only

    @property
    def record_bytes_max(self) -> int:
        """The largest record (key, value and headers) this broker takes."""
        return self.core.record_bytes_max

    # ------------------------------------------------------------ topics

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        compaction: bool = False,
        lake: bool | None = None,
        value_schema: dict[str, Any] | None = None,
    ) -> TopicInfo:
        """Create a topic; creating it again with the same settings is a no-op. `lake`:
        keep it as Parquet too (True), not (False), or as the broker does (None).
        `value_schema`: the JSON Schema its values follow, whose fields the lake keeps
        as typed columns (brook/value_schema.py says what it reads of it).

        Raises InvalidName, BadRequest for bad settings, Conflict if it exists
        with other settings.
        """
        self.core.check_open()
        validate.topic_name(name)
        config = TopicConfig(
            partitions=validate.whole(partitions, "partitions", 1, limits.partitions_max),
            retention_ms=validate.optional_whole(retention_ms, "retention_ms", 1),
            retention_bytes=validate.optional_whole(retention_bytes, "retention_bytes", 1),
            compaction=bool(compaction),
            lake=None if lake is None else bool(lake),
            value_schema=None if value_schema is None else value_schemas.check(value_schema),
        )
        with self._lake_starting:
            if config.lake and self.lake is None and not self.read_only:
                self.lake = self._started(_lake_writer(self.core, self._lake_lag_ms, False))
        return self.core.create_topic(name, config).info()

    def topics(self) -> list[TopicInfo]:
        self.core.check_open()
        found = []
        for state in self.core.topic_states(opened=True):
            with contextlib.suppress(TopicNotFound):  # deleted meanwhile
                found.append(state.info())
        return found

    def delete_topic(self, name: str) -> None:
        """Delete a topic and all its records and group positions. Raises TopicNotFound."""
        self.core.check_open()
        self.core.delete_topic(validate.topic_name(name))

    # ------------------------------------------------------------ the lake

    def lake_sync(self, topic: str | None = None) -> list[LakeStatus]:
        """Write every acknowledged record not yet in the lake (of `topic`, or of every
        topic) as Parquet; returns once it is durable, with where the lake stands.
        Raises LakeOff when the lake is off, TopicNotFound, ReadOnly."""
        self.core.check_open()
        self.core.check_writable("sync the lake")
        if self.lake is None:
            raise LakeOff("the lake is off: open the broker with lake=True (brook serve --lake)")
        if topic is not None:
            topic = validate.topic_name(topic)
            if not self.core.has_topic(topic):
                raise TopicNotFound(f"topic {topic} does not exist")
        return self._lake_statuses(self.lake.sync(topic))

    def lake_status(self, topic: str | None = None) -> list[LakeStatus]:
        """Where the lake stands for `topic` (or every topic): files, rows, and per
        partition its offset, the log's end and how long the oldest record not yet in
        it has waited. Works read-only, beside the broker that writes."""
        self.core.check_open()
        if topic is not None:
            topic = validate.topic_name(topic)
            if not self.core.has_topic(topic):
                raise TopicNotFound(f"topic {topic} does not exist")
        return self._lake_statuses([topic] if topic is not None else lake_topics(self.core))

    def _lake_statuses(self, names: list[str]) -> list[LakeStatus]:
        now = self.core.now_ms()
        return [
            self._lake_watch.status(name, self.core.topic_state(name).config.partitions, now)
            for name in names
        ]

    def _lake_committed(self, topic: str, group: str | None) -> Manifest | None:
        """A lake table's manifest as this broker's writer last stored it, if it writes it."""
        return None if self.lake is None else self.lake.committed(topic, group)

    def topic(self, name: str) -> Topic:
        """A handle on a topic; it is created with defaults on first write."""
        self.core.check_open()
        return Topic(self.core, self.staging, validate.topic_name(name))

    def consumer(self, topic: str, group: str, start: str = "earliest") -> Consumer:
        """A member of stream group `group` on `topic`. Raises TopicNotFound."""
        self.core.check_open()
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
        concurrency_per_key: int | None = None,
        key_rate_limit_per_s: float | None = None,
        rate_limit_per_s: float | None = None,
        lower_priority_share: float | None = None,
        create: bool = True,
    ) -> Queue:
        """Queue group `group` on `topic`, created if new (and the topic, with defaults);
        with `create=False` an unknown topic or group raises TopicNotFound or
        GroupNotFound instead, so a look at a group never leaves one behind.

        Settings left as None keep the stored ones (the defaults of a new group).
        Raises InvalidName, BadRequest for bad settings.
        """
        self.core.check_open()
        return Queue(
            self.queues.group(
                topic,
                group,
                create,
                visibility_timeout_ms=visibility_timeout_ms,
                max_attempts=max_attempts,
                ordering=ordering,
                dead_letter_topic=dead_letter_topic,
                backoff=backoff,
                expire_after_ms=expire_after_ms,
                concurrency_per_key=concurrency_per_key,
                key_rate_limit_per_s=key_rate_limit_per_s,
                rate_limit_per_s=rate_limit_per_s,
                lower_priority_share=lower_priority_share,
            )
        )

    # ------------------------------------------------------------ joins

    def create_joins(self, joins: Sequence[JoinSpec]) -> list[JoinInfo]:
        """Make joins (brook/joins): each appends its continuation once, after every
        member finished acked (or fails, a member dead). Durable when it returns;
        idempotent by join id (the same definition again changes nothing; another
        is a Conflict)."""
        return self.joins.create([_join_spec(j) for j in joins])

    def join(self, join_id: str, timeout: float = 0.0) -> JoinInfo:
        """Where join `join_id` stands, waiting up to `timeout` seconds for it to end
        (and, if it fired, for its continuation to be appended). JoinNotFound."""
        if timeout:
            self.joins.wait(join_id, validate.seconds(timeout, "timeout"))
        return self.joins.get(join_id)

    def joins_idle(self, timeout: float = 0.0) -> bool:
        """Whether every join moved as far as the jobs finished so far let it (no
        finish left to count, no join to decide, no continuation on its way), waiting
        up to `timeout` seconds for it: for tests that run jobs by hand."""
        return self.joins.wait_idle(timeout) if timeout else self.joins.idle()

    def join_settled(self, join_id: str) -> bool:
        """Whether `join(join_id)` would tell an end (True for an unknown join): what
        a long-poll waits on. Takes no lock."""
        return self.joins.settled(join_id)

    # ------------------------------------------------------------ periodic schedules

    def put_schedule(
        self,
        name: str,
        topic: str,
        value: bytes = b"",
        cron: str | None = None,
        every_ms: int | None = None,
        tz: str = "UTC",
        missed: str = "skip",
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
    ) -> ScheduleInfo:
        """Create or change the periodic schedule `name`: a record (`value`, `key`,
        `headers`) appended to `topic` once per slot of `cron` (five fields, in time
        zone `tz`) or of `every_ms`. `missed`: what a slot the broker was down over
        gets ("skip", or "run_once": one record for all missed). Raises BadRequest."""
        spec = spec_of(
            name,
            validate.topic_name(topic),
            value=value,
            cron=cron,
            every_ms=every_ms,
            tz=tz,
            missed=missed,
            key=key,
            headers=headers,
        )
        return self.schedules.put(spec)

    def get_schedule(self, name: str) -> ScheduleInfo:
        """Raises ScheduleNotFound."""
        return self.schedules.get(name)

    def list_schedules(self) -> list[ScheduleInfo]:
        return self.schedules.list()

    def pause_schedule(self, name: str) -> ScheduleInfo:
        return self.schedules.pause(name)

    def resume_schedule(self, name: str) -> ScheduleInfo:
        return self.schedules.resume(name)

    def delete_schedule(self, name: str) -> bool:
        """False if there was none."""
        return self.schedules.delete(name)

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
        self.core.check_open()
        if len(specs) > limits.schedule_timers_max:
            raise BadRequest(f"at most {limits.schedule_timers_max} timers per call")
        now = self.core.now_ms()
        ids = new_timer_ids(len(specs))
        timers = timer_checks.timers(specs, now, ids, self.core.record_bytes_max)
        self.timers.schedule(timers, given_ids=any(spec.timer_id is not None for spec in specs))
        return [t.id for t in timers]

    def cancel_timer(self, timer_id: str) -> bool:
        """Cancel a pending timer, durably; False if it fired, was cancelled or is unknown."""
        self.core.check_open()
        return self.timers.cancel(validate.timer_id(timer_id))

    def timer(self, timer_id: str) -> TimerInfo | None:
        """A timer's state: pending, fired (where), cancelled; None if unknown."""
        self.core.check_open()
        return self.timers.info(validate.timer_id(timer_id))

    def list_timers(
        self,
        topic: str | None = None,
        due_from_ms: int | None = None,
        due_to_ms: int | None = None,
        after: str | None = None,
        limit: int = limits.timers_page_default,
    ) -> TimerPage:
        """Pending timers in order of due time (then id), a page of at most `limit`:
        of `topic` only, due in [due_from_ms, due_to_ms), after the cursor `after` (a
        page's `next`). Raises BadRequest, InvalidName."""
        self.core.check_open()
        if topic is not None:
            validate.topic_name(topic)
        low = None if due_from_ms is None else validate.whole(due_from_ms, "due_from_ms", 0)
        high = None if due_to_ms is None else validate.whole(due_to_ms, "due_to_ms", 0)
        count = validate.whole(limit, "limit", 1, limits.timers_page_max)
        position = None
        if after is not None:
            position = parse_cursor(after) if isinstance(after, str) else None
            if position is None:
                raise BadRequest(f"after {after!r} is not a page's next cursor (due_ms:timer_id)")
        timers, more = self.timers.list_pending(topic, low, high, position, count)
        return TimerPage(timers, None if more is None else cursor_of(*more))

    # What the server, the dashboard, /metrics and the CLI read and call: read models
    # (plain values), handles, and the event loop's bridge. The shells see nothing else
    # of the broker (pyproject.toml's import contracts, tests/test_facade.py).

    # ------------------------------------------------------------ running

    def close(self) -> None:
        """Answer every in-flight append, then release the storage. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._close_parts()

    def _close_parts(self) -> None:
        for service in reversed(self._services):
            service.stop()
        self.core.stop_writing()
        for service in reversed(self._services):
            service.close()
        self.core.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Broker {self.storage!r}>"


def _join_spec(given: Any) -> JoinSpec:
    """A join as given (a JoinSpec, or a dict of its fields), its types checked."""
    try:
        return msgspec.msgpack.decode(msgspec.msgpack.encode(given), type=JoinSpec)
    except (msgspec.ValidationError, msgspec.DecodeError, TypeError) as exc:
        raise BadRequest(f"not a join: {exc}") from None


def _lake_writer(core: Core, lag_ms: int, every_topic: bool) -> LakeService:
    """The lake's writer; it needs pyarrow (the `lake` extra), loaded only when asked."""
    try:
        from brook.lake.service import LakeService
    except ModuleNotFoundError as exc:
        if exc.name not in ("pyarrow", "numpy"):
            raise
        raise BadRequest(f"the lake needs {exc.name}: pip install 'brook-broker[lake]'") from None
    return LakeService(core, lag_ms, every_topic)
