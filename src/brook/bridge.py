"""The broker as an asyncio event loop sees it (`Broker.bridge(loop)`).

The committer and the services run on threads; a server answers on one event loop.
The bridge lets a coroutine append and wait without ever blocking the loop: an
append hands its records to the committer and awaits a future that the commit
round resolves, and a long poll sleeps on the loop until a commit round (or a due
retry) may have brought what it waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Callable

from brook import limits, validate
from brook.codec.batch import ClientBatches, Columns
from brook.commit import AppendRequest
from brook.core import Core, Hooks, TopicState, acks_in_order, route
from brook.errors import TopicNotFound
from brook.groups.consumer import GroupStore
from brook.log.partition import PartitionLog
from brook.queue.store import QueueStore
from brook.records import Ack


class Completions:
    """Answers from the committer's threads, handed to the event loop in one wake-up per
    round instead of one per request (each cross-thread wake-up costs a syscall)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._ready: list[tuple[asyncio.Future[AppendRequest], AppendRequest]] = []

    def done(self, future: asyncio.Future[AppendRequest], request: AppendRequest) -> None:
        with self._lock:
            self._ready.append((future, request))
            first = len(self._ready) == 1
        if first:
            self.loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for future, request in ready:
            # The callback refers to the future and the future will refer to the
            # request: a cycle that would keep the request's records in memory
            # until the garbage collector ran. Break it.
            request.on_done = None
            if not future.done():
                future.set_result(request)


class NewRecords:
    """Wakes waiting coroutines after each commit round (called from the syncer thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting = 0
        self._event = asyncio.Event()

    def notify_threadsafe(self, topics: frozenset[str] = frozenset()) -> None:
        """A commit round wrote to `topics`: wake the waiters."""
        # Only bother the loop when someone waits; a waiter registers before it
        # reads, so a round published before this check is seen by its read.
        if self.waiting:
            self.loop.call_soon_threadsafe(self.fire)

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, seconds: float) -> None:
        event = self._event
        with contextlib.suppress(TimeoutError):  # the caller checks for data either way
            await asyncio.wait_for(event.wait(), seconds)


class LoopBridge:
    """Appends and waits for one event loop. `stop()` ends every wait (a server
    stopping answers its long polls at once); `close()` detaches from the broker."""

    def __init__(
        self, core: Core, groups: GroupStore, queues: QueueStore, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._core = core
        self._groups = groups
        self._queues = queues
        self.loop = loop
        self.new_records = NewRecords(loop)
        self.completions = Completions(loop)
        self.stopping = False
        self._hooks = core.register(
            Hooks("event loop", on_round=self.new_records.notify_threadsafe)
        )

    def stop(self) -> None:
        self.stopping = True
        self.new_records.fire()

    def close(self) -> None:
        self._core.unregister(self._hooks)

    # ------------------------------------------------------------ appends

    def state(self, topic: str) -> TopicState:
        """The topic's state; InvalidName for a reserved name, TopicNotFound if unknown."""
        if topic.startswith("__"):
            validate.topic_name(topic)  # reserved for Brook's own topics: InvalidName
        return self._core.topic_state(topic)  # checks the name of a topic it does not know

    def partitions(self, topic: str) -> int:
        """How many partitions the topic has; TopicNotFound, InvalidName."""
        return self.state(topic).config.partitions

    def known(self, topic: str) -> bool:
        """Whether the topic exists; InvalidName for a reserved or malformed name."""
        try:
            self.state(topic)
        except TopicNotFound:
            return False
        return True

    def submit(
        self, topic: str, columns: Columns | ClientBatches, partition: int | None = None
    ) -> asyncio.Future[AppendRequest] | None:
        """The common append without a coroutine of its own (every coroutine in the
        chain is resumed again when the answer comes): records of a topic that exists,
        all bound for one partition. A future answered once they are durable (its
        result's `result()`: the acks, or the error raised); None for anything else:
        then `append`."""
        state = self.state(topic)
        if not state.opened:  # its logs are opened off the loop (append)
            return None
        routed = route(state, columns, partition)
        if len(routed) != 1:
            return None
        only, _, part = routed[0]
        return self._submit(state.logs[only], part)

    async def append(
        self, topic: str, columns: Columns | ClientBatches, partition: int | None = None
    ) -> list[Ack]:
        """Append checked records to `topic` (made with defaults if new), by key or
        spread, or all to `partition`; acks in input order once durable."""
        try:
            state = self.state(topic)
        except TopicNotFound:
            state = await self.loop.run_in_executor(
                None, functools.partial(self._core.topic_state, topic, create=True)
            )
        if not state.opened:  # stored before the broker started: opening reads storage
            await self.loop.run_in_executor(None, lambda: state.logs)
        routed = route(state, columns, partition)
        if len(routed) == 1:  # the common case, one coroutine less on every resumption
            only, _, part = routed[0]
            return (await self._submit(state.logs[only], part)).result()
        futures = [
            (indexes, self._submit(state.logs[partition], part))
            for partition, indexes, part in routed
        ]
        answered = [(indexes, await future) for indexes, future in futures]
        return acks_in_order(len(columns), answered)

    def _submit(
        self, log: PartitionLog, columns: Columns | ClientBatches
    ) -> asyncio.Future[AppendRequest]:
        """Hand records to the committer; the future resolves on the loop once answered."""
        future: asyncio.Future[AppendRequest] = self.loop.create_future()
        done = functools.partial(self.completions.done, future)
        self._core.submit(AppendRequest(log, columns, done))
        return future

    # ------------------------------------------------------------ waits

    async def wait_for_records(
        self, topic: str, partition: int, offset: int, deadline: float
    ) -> bool:
        """Wait until `deadline` (time.monotonic()) until `partition` of `topic` holds a record at `offset` or
        beyond; True if it does."""
        log = self.state(topic).log(partition)
        return await self._wait(deadline, lambda: log.durable_offset > offset)

    async def wait_for_group(self, topic: str, group: str, deadline: float) -> bool:
        """Wait until `deadline` at most until stream group `group` has records to poll."""
        groups = self._groups
        return await self._wait(deadline, lambda: groups.records_waiting(topic, group))

    async def wait_for_work(self, topic: str, group: str, deadline: float) -> bool:
        """Wait until `deadline` at most until queue group `group` may have work: new records, or a
        retry or lease expiry falling due. True if it may (or the group is gone: the
        next lease says so)."""
        found = self._queues.find(topic, group)
        if found is None:
            return True
        core = self._core
        return await self._wait(deadline, found.has_work, found.next_due_ms, core.now_ms)

    async def wait_for_job(
        self, topic: str, group: str, partition: int, offset: int, deadline: float
    ) -> bool:
        """Wait until `deadline` at most until the record at (partition, offset) is
        finished in queue group `group` (acked or dead, durably); True if it is (or
        the group is gone: the next look says so)."""
        found = self._queues.find(topic, group)
        if found is None:
            return True
        return await self._wait(deadline, functools.partial(found.finished, partition, offset))

    async def wait_until(self, ready: Callable[[], bool], deadline: float) -> bool:
        """Wait until `deadline` at most for `ready()`, looked at after each commit
        round (and when a service wakes the waiters); `ready` must take no lock the
        committer waits on. True if it is."""
        return await self._wait(deadline, ready)

    async def _wait(
        self,
        deadline: float,
        ready: Callable[[], bool],
        due_ms: Callable[[], int | None] | None = None,
        now_ms: Callable[[], int] | None = None,
    ) -> bool:
        self.new_records.waiting += 1
        try:
            while not ready():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.stopping:
                    return False
                due = due_ms() if due_ms is not None else None
                if due is not None and now_ms is not None:
                    until_due = (due - now_ms()) / 1000
                    if until_due <= 0:
                        return True
                    remaining = min(remaining, until_due)
                await self.new_records.wait(min(remaining, limits.wake_check_s))
            return True
        finally:
            self.new_records.waiting -= 1
