"""The broker's core: what every service shares, and nothing a service owns.

The core owns the storage location (locked, or attached read-only), the clock,
the committer (the one writer of every log), the topic registry, the signal
that new records are durable, and the closed flag. It creates, deletes,
appends to and reads topics, and runs maintenance.

Services (stream groups, queue groups, timers, staged writes) are built on the
core, never on the Broker façade. Each owns its storage layout and tells the
core, through hooks it registers, what it does when a topic is deleted, what
maintenance it needs, and which records retention must keep for it.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import msgspec

from brook import layout, limits, side_by_side, storage_format, validate
from brook.clock import Clock
from brook.codec.batch import ClientBatches, Columns
from brook.commit import AppendRequest, Committer, Waiter
from brook.commit.refusing import RefusingCommitter
from brook.core.recovery import Recovery
from brook.core.topics import Hooks, Needed, RetentionHold, TopicState, open_unless_deleted
from brook.errors import (
    BrookError,
    Closed,
    Conflict,
    PartitionNotFound,
    ReadOnly,
    TopicNotFound,
)
from brook.idempotency import IdempotencyIndex
from brook.log.partition import LogSettings, PartitionLog
from brook.log.wal import WriteAheadLog
from brook.name_locks import NameLocks
from brook.partitioner import partition_for_key
from brook.ranges import Ranges
from brook.records import Ack, TopicConfig
from brook.stats import CommitStats
from brook.storage import Storage
from brook.storage.readonly import ReadOnlyStorage
from brook.supervisor import Supervisor

log = logging.getLogger("brook")

T = TypeVar("T")


class Core(Recovery):
    def __init__(
        self,
        storage: Storage,
        *,
        clock: Clock,
        settings: LogSettings,
        supervisor: Supervisor,
        linger_ms: float = limits.linger_ms_default,
        batch_bytes_max: int = limits.batch_bytes_max_default,
        idempotency_window_ms: int = limits.idempotency_window_ms_default,
        record_bytes_max: int = limits.record_bytes_max_default,
        read_only: bool = False,
        checkpoint_interval_ms: int = limits.checkpoint_interval_ms_default,
        wal_bytes_max: int = limits.wal_bytes_max_default,
    ) -> None:
        """Own `storage` (lock it, sweep it, recover its topics) and start the
        committer; with `read_only`, attach to it beside its owner instead, and
        refuse every write (SPEC §0). On failure everything opened is closed."""
        self.record_bytes_max = record_bytes_max
        """The largest record this broker takes (the services check theirs against it)."""
        self._wal_bytes_max = wal_bytes_max
        if hasattr(storage, "supervisor"):  # a backend with loops of its own (S3)
            storage.supervisor = supervisor
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
        self.settings = settings
        self.supervisor = supervisor
        self.read_only = read_only
        self._topics: dict[str, TopicState] = {}
        self._names: list[str] = []
        self._topic_locks = NameLocks()
        """A topic's creation and deletion take turns (its files are made off the
        writer role: _make_topic); other topics' go side by side."""
        """The topics' names, sorted (topics_starting): replaced whole, like _topics."""
        self._closed = False
        self.appended = threading.Condition()
        """Notified after every commit round, for readers waiting on new records."""
        self._hooks: tuple[Hooks, ...] = ()
        """The services' hooks (register); replaced whole, never changed in place, so
        a thread going through them never sees the tuple change under it."""
        self.idempotency = IdempotencyIndex(idempotency_window_ms)
        self._serving = False
        """Set once started: a topic's logs opened from then on read their idempotency keys."""
        self._opening_done = threading.Event()
        """Set once every stored topic's logs are open (or the broker closes)."""
        try:
            storage_format.check(storage, read_only)
            sweep = getattr(storage, "sweep_trash", None)
            if sweep is not None:
                sweep()
            wal: WriteAheadLog | None = None
            with _no_cycle_collection():
                self._recover_topics()
                keeps_wal = bool(getattr(storage, "write_ahead_log", False))
                if keeps_wal or storage.list(layout.WAL):  # one left by an owner that kept one
                    if read_only:
                        self._read_wal()
                    else:
                        wal = self._replay_wal(keep=keeps_wal)
                if not read_only:
                    self._rebuild_idempotency()
            self.committer: Committer | RefusingCommitter
            if read_only:
                self.committer = RefusingCommitter()
            else:
                self.committer = Committer(
                    self.idempotency,
                    linger_ms=linger_ms,
                    batch_bytes_max=batch_bytes_max,
                    clock=clock.wall,
                    maintenance=self.maintain,
                    on_round=self._wake_readers,
                    supervisor=supervisor,
                    wal=wal,
                    checkpoint_interval_ms=checkpoint_interval_ms,
                    wal_bytes_max=wal_bytes_max,
                    dirty_files_max=_files_budget(storage),
                )
        except BaseException:
            self._close_logs()
            storage.close()
            raise
        if not read_only:
            supervisor.start("opening", self.open_topics, self._opening_done)

    # ------------------------------------------------------------ state

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        if self._closed:
            raise Closed("the broker is closed")

    def check_writable(self, what: str) -> None:
        """Raise Closed, or ReadOnly saying that `what` needs the owning broker."""
        self.check_open()
        if self.read_only:
            raise ReadOnly(f"cannot {what}: this broker was opened read-only (read_only=True)")

    def now_ms(self) -> int:
        """The broker's wall clock, in ms since the epoch."""
        return self.clock.now_ms()

    # ------------------------------------------------------------ topics

    def topic_state(self, name: str, create: bool = False) -> TopicState:
        """The topic's state; created with defaults when `create`, else TopicNotFound.
        The name must have been checked (validate.topic_name) by the caller."""
        self.check_open()
        state = self._topics.get(name)
        if state is not None:
            return state
        validate.topic_name(name)
        if not create:
            raise TopicNotFound(f"topic {name} does not exist")
        self.check_writable(f"create topic {name}")
        return self.create_topic(name, TopicConfig(), exact=False)

    def has_topic(self, name: str) -> bool:
        return name in self._topics

    def topic_states(self, opened: bool = False) -> list[TopicState]:
        """Every topic, by name; with `opened`, their logs opened first (side by side,
        where the storage makes reads wait)."""
        states = [state for _, state in sorted(self._topics.items())]
        if opened:
            waiting = [state for state in states if not state.opened]
            side_by_side.each(self.storage, waiting, open_unless_deleted, lambda _: None)
        return states

    def topics_starting(self, prefixes: Iterable[str]) -> list[str]:
        """The names of the topics that begin with one of `prefixes`, sorted: found
        by bisection, so an endpoint's patterns cost the topics they may match, not
        every topic the broker has."""
        names = self._names
        found: set[str] = set()
        for prefix in set(prefixes):
            i = bisect.bisect_left(names, prefix)
            while i < len(names) and names[i].startswith(prefix):
                found.add(names[i])
                i += 1
        return sorted(found)

    def create_topic(self, name: str, config: TopicConfig, exact: bool = True) -> TopicState:
        """The topic, created with `config` if new. With `exact`, Conflict if it
        exists with other settings."""
        self.check_open()
        state = self._topics.get(name)
        if state is None:
            with self._topic_locks.hold(name):
                state = self._topics.get(name) or self._make_topic(name, config)
        if exact and state.config != config:
            raise Conflict(
                f"topic {name} exists with {_differences(state.config, config)}; "
                "use the settings it has, or delete it first"
            )
        return state

    def _make_topic(self, name: str, config: TopicConfig) -> TopicState:
        """Holding the topic's lock: make its files, then serve it. The files are
        made off the writer role (their mkdirs and fsyncs took 10-15 ms a topic there,
        and every append waited behind them while customers arrived): nothing else
        writes them, since no round can name the topic before it is served, and a
        creation and a deletion of one name take turns by its lock. Only serving it
        takes the role, and many topics made at once are served in one writer pass."""
        logs: list[PartitionLog] = []
        try:
            for p in range(config.partitions):
                logs.append(self.open_log(name, p))
            # The config is written last: a topic exists once its config is durable.
            self.storage.write_atomic(layout.topic_config(name), msgspec.json.encode(config))
            state = TopicState(name, config, logs)
            self.committer.call(lambda: self._serve_new(state))
        except BaseException:
            for made in logs:
                made.close()
            raise
        return state

    def _serve_new(self, state: TopicState) -> None:
        """Writer role: a topic just made is served from now on."""
        name = state.name
        self._topics = {**self._topics, name: state}
        names = list(self._names)
        bisect.insort(names, name)
        self._names = names
        for hooks in self._hooks:
            if hooks.on_topic_created is not None:
                hooks.on_topic_created(name)

    def checkpoint(self) -> None:
        """Make every segment durable now, so the WAL holds nothing a restart must replay."""
        self.check_open()
        if isinstance(self.committer, Committer):
            self.committer.checkpoint()

    def log_dropped(self, name: str) -> None:
        """A service deleted a log of its own (a status log), or every log whose name
        starts with `name/`: recorded in the WAL first (writer role), so a restart never
        replays the old records into a log made again under the name."""
        if isinstance(self.committer, Committer):
            self.committer.topic_dropped(name)

    def delete_topic(self, name: str) -> None:
        """Delete a topic, its records and everything services keep for it.
        Raises TopicNotFound."""
        self.check_open()
        with self._topic_locks.hold(name):
            self.committer.call(lambda: self._delete_on_writer(name))

    def _delete_on_writer(self, name: str) -> None:
        state = self._topics.get(name)
        if state is None:
            raise TopicNotFound(f"topic {name} does not exist")
        if isinstance(self.committer, Committer):
            self.committer.topic_dropped(name)
        topics = dict(self._topics)
        del topics[name]
        self._topics = topics
        self._names = [n for n in self._names if n != name]
        for partition_log in state.end("deleted"):
            partition_log.close()
        # The config goes first, so a crash mid-way leaves no half-topic behind.
        self.storage.delete(layout.topic_config(name))
        self.storage.delete_prefix(layout.topic_prefix(name))
        self.idempotency.forget_topic(name)
        for hooks in self._hooks:
            if hooks.on_topic_deleted is not None:
                hooks.on_topic_deleted(name)

    # ------------------------------------------------------------ appends

    def append(
        self, topic: str, columns: Columns | ClientBatches, partition: int | None = None
    ) -> list[Ack]:
        """Append checked records to `topic` (created with defaults if new) as one
        durable batch per partition; acks in input order, once all are durable.
        Records go to `partition`, else by key (unkeyed ones to one partition per
        call). If any partition's batch fails, raises its error (batches of other
        partitions may have been appended)."""
        state = self.topic_state(topic, create=True)
        routes = route(state, columns, partition)
        if len(routes) == 1:
            return self.committer.append(AppendRequest(state.logs[routes[0][0]], routes[0][2]))
        requests = []
        for p, indexes, part in routes:
            request = AppendRequest(state.logs[p], part, Waiter())
            self.committer.submit(request)
            requests.append((indexes, request))
        for _, request in requests:
            assert isinstance(request.on_done, Waiter)
            request.on_done.wait()
        return acks_in_order(len(columns), requests)

    def append_to(self, log: PartitionLog, columns: Columns | ClientBatches) -> list[Ack]:
        """Append checked records to one partition as one durable batch; their acks."""
        return self.committer.append(AppendRequest(log, columns))

    @property
    def commit_stats(self) -> CommitStats:
        """The committer's counters (records, bytes, batches, syncs, latencies)."""
        return self.committer.stats

    def submit(self, request: AppendRequest) -> None:
        """Queue an append without waiting; its `on_done` runs once it is answered."""
        self.committer.submit(request)

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` with the writer role (nothing else writes meanwhile); its result."""
        result: T = self.committer.call(fn)
        return result

    # ------------------------------------------------------------ services

    def register(self, hooks: Hooks) -> Hooks:
        """Have the core call `hooks` from now on (until `unregister`)."""
        self._hooks = (*self._hooks, hooks)
        return hooks

    def unregister(self, hooks: Hooks) -> None:
        """Stop calling `hooks` (a no-op if they are not registered)."""
        self._hooks = tuple(h for h in self._hooks if h is not hooks)

    def group_deleted(self, topic: str, group: str) -> None:
        """Writer role: tell the services that a queue group and its status log are gone."""
        for hooks in self._hooks:
            if hooks.on_group_deleted is not None:
                hooks.on_group_deleted(topic, group)

    def status_log_hold(self, topic: str, group: str) -> int | None:
        """The status-log offset of a queue group below which no service needs its
        entries any more (None: none holds any)."""
        holds = [
            held
            for hooks in self._hooks
            if hooks.status_log_hold is not None
            and (held := hooks.status_log_hold(topic, group)) is not None
        ]
        return min(holds) if holds else None

    # ------------------------------------------------------------ waiting

    def wake_waiters(self) -> None:
        """Wake every wait on commit rounds (`wait_for_records`, the event loops'
        long-polls) to look again: a service changed what they wait for without one."""
        self._wake_readers(frozenset())

    def _wake_readers(self, topics: frozenset[str] | None = None) -> None:
        with self.appended:
            self.appended.notify_all()
        if topics is None:
            topics = frozenset(self._topics)
        for hooks in self._hooks:
            if hooks.on_round is not None:
                hooks.on_round(topics)

    def wait_for_records(self, ready: Callable[[], bool], seconds: float) -> None:
        """Wait up to `seconds` for a commit round, unless `ready()` already (or the
        broker closes). Returns early; callers look again."""
        with self.appended:
            if not ready() and not self._closed:
                self.appended.wait(seconds)

    # ------------------------------------------------------------ maintenance

    def maintain(self) -> None:
        """Writer role: expire idempotency keys, compact, apply retention, and run
        every service's maintenance. Each task is supervised on its own: one that
        fails is reported and retried next time, and the others still run."""
        guard = self.supervisor.guard
        now = self.now_ms()
        with guard("maintenance", "idempotency"):
            self.idempotency.expire(now)
        for hooks in self._hooks:
            if hooks.maintain is not None:
                with guard("maintenance", hooks.name):
                    hooks.maintain()
        close_idle = getattr(self.storage, "close_idle", None)
        if close_idle is not None:
            with guard("maintenance", "open files"):
                close_idle()  # cold topics and idle groups hold no descriptor
        for state in list(self._topics.values()):
            if not state.opened:  # maintained once its logs open (soon: open_topics)
                continue
            config = state.config
            for partition_log in state.logs if config.compaction else []:
                with guard("maintenance", f"compaction of {state.name}/{partition_log.partition}"):
                    self._compact(state.name, partition_log)
            if config.retention_ms is None and config.retention_bytes is None:
                continue
            aged_by = self.clock.elapsed_ms()  # a clock stepped forward deletes nothing early
            for partition_log in state.logs:
                with guard("maintenance", f"retention of {state.name}/{partition_log.partition}"):
                    self._retain(state, partition_log, aged_by)

    def _compact(self, topic: str, partition_log: PartitionLog) -> None:
        dropped = partition_log.compact()
        if dropped:
            log.info(
                "compaction dropped %d superseded records of %s/%d",
                dropped,
                topic,
                partition_log.partition,
            )

    def _retain(self, state: TopicState, partition_log: PartitionLog, now: int) -> None:
        holds = [
            needed
            for hooks in self._hooks
            if hooks.retention_hold is not None
            and (needed := hooks.retention_hold(state.name, partition_log.partition)) is not None
        ]
        removed = partition_log.enforce_retention(
            state.config.retention_ms, state.config.retention_bytes, now, _union(holds)
        )
        if removed:
            log.info(
                "retention removed %d segments of %s/%d",
                removed,
                state.name,
                partition_log.partition,
            )

    def run_maintenance(self) -> None:
        """Maintain now instead of waiting for the periodic check."""
        self.check_open()
        self.committer.call(self.maintain)

    # ------------------------------------------------------------ closing

    def stop_writing(self) -> None:
        """Refuse new calls, answer every in-flight append, stop the committer and
        wake every waiting reader. Services' threads must have stopped first."""
        self._closed = True
        self._opening_done.set()
        self.committer.close()
        self._wake_readers()

    def close(self) -> None:
        """Close every log and release the storage (after `stop_writing`)."""
        self._closed = True
        self._close_logs()
        self.storage.close()

    def _close_logs(self) -> None:
        self._opening_done.set()
        for state in self._topics.values():
            for partition_log in state.end("closed"):  # waits for an opening under way
                partition_log.close()


def _files_budget(storage: Storage) -> int:
    """How many files the storage keeps open at most (its descriptor budget), for the
    checkpoints to begin before unsynced segments fill it."""
    handles = getattr(storage, "handles", None)
    return int(getattr(handles, "budget", limits.open_files_raise_max))


def _union(holds: list[Needed]) -> Needed | None:
    if not holds:
        return None
    if len(holds) == 1:
        return holds[0]

    def needed(base: int, next_offset: int) -> Ranges:
        wanted = Ranges()
        for hold in holds:
            wanted |= hold(base, next_offset)
        return wanted

    return needed


def route(
    state: TopicState, columns: Columns | ClientBatches, partition: int | None = None
) -> list[tuple[int, list[int], Columns | ClientBatches]]:
    """Split records by partition: (partition, their indexes in `columns`, their records).

    With a `partition`, all of them go there (PartitionNotFound if the topic has
    no such partition). Otherwise keyed records go to their key's partition;
    unkeyed ones all go to one partition chosen round-robin per call, so they
    stay one batch. A client's batches stay as they are unless their keys send
    them to several partitions.
    """
    partitions = state.config.partitions
    if partition is not None:
        if partition >= partitions:
            raise PartitionNotFound(f"topic {state.name} has no partition {partition}")
        return [(partition, list(range(len(columns))), columns)]
    unkeyed = state.spread.next(partitions)
    if isinstance(columns, ClientBatches):
        if partitions == 1 or not columns.keyed:
            return [(unkeyed, list(range(len(columns))), columns)]
        bytes_ = columns.bytes
        columns = columns.columns()
        columns.bytes = bytes_
    if columns.keys is None or partitions == 1:
        return [(unkeyed, list(range(len(columns))), columns)]
    by_partition: dict[int, list[int]] = {}
    for i, key in enumerate(columns.keys):
        p = unkeyed if key is None else partition_for_key(key, partitions)
        by_partition.setdefault(p, []).append(i)
    if len(by_partition) == 1:
        return [(p, indexes, columns) for p, indexes in by_partition.items()]
    return [(p, indexes, columns.select(indexes)) for p, indexes in by_partition.items()]


def acks_in_order(count: int, answered: list[tuple[list[int], AppendRequest]]) -> list[Ack]:
    """The acks of records routed to several partitions, back in input order, once
    every request is answered; raises the first failure (other partitions' records
    may have been appended)."""
    acks: list[Ack] = [Ack(0, 0, 0)] * count
    error: BaseException | None = None
    for indexes, request in answered:
        try:
            for i, ack in zip(indexes, request.result(), strict=True):
                acks[i] = ack
        except BrookError as exc:
            error = error or exc
    if error is not None:
        raise error
    return acks


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off while a start builds its state: every object made
    then lives on, and each full collection walks all of them again, so with 100,000
    topics the collections took a third of the start (24 s, 16 s without them)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _differences(have: TopicConfig, asked: TopicConfig) -> str:
    """The settings in which `asked` differs from `have`, for people:
    "partitions 1 (asked 4), retention_ms none (asked 86400000)"."""
    return ", ".join(
        f"{name} {_shown(getattr(have, name))} (asked {_shown(getattr(asked, name))})"
        for name in have.__struct_fields__
        if getattr(have, name) != getattr(asked, name)
    )


__all__ = ["Core", "Hooks", "RetentionHold", "TopicState", "acks_in_order", "route"]
