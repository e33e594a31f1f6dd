"""The delivery loop: leases records from every endpoint's queue groups and posts
them to the endpoint, each endpoint isolated from the others (SPEC §7).

One asyncio event loop on a thread of its own (supervised: "delivery"). Each
round asks the scheduler (scheduler.py: which attempts start, which groups to
lease from, which records to give back) and does what its plan says, every
lease, send and settlement a task of its own, so a slow or failing endpoint
holds only its own budget: the others' attempts never wait behind it.

A round looks only at the endpoints with something to do (records appended to
their topics, an attempt or a lease that ended, a retry or a breaker's probe come
due, a change), never at every endpoint: its cost grows with the work, not with
the number of endpoints. A sweep over all of them every limits.delivery_sweep_s is the safety net.

Leasing and settling wait for the status log to be durable, so they run on a
pool of threads; the attempts themselves (address checked, request signed and
sent, answer read) are sender.py's, on this loop, or in worker processes
(`delivery_workers`, workers.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import heapq
import logging
import random
import resource
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import msgspec
import uvloop

from brook import limits
from brook.core import Hooks
from brook.delivery import addresses
from brook.delivery import endpoint as ep
from brook.delivery.endpoint import Endpoint
from brook.delivery.outcome import (
    Action,
    ErrorKind,
    Result,
    Verdict,
    final,
    given_up,
    judge,
)
from brook.delivery.scheduler import Ahead, Lane, Lease, Scheduler, Send
from brook.delivery.sender import Sender
from brook.delivery.stats import EndpointStats, Totals
from brook.delivery.store import EndpointStore
from brook.delivery.workers import Workers
from brook.errors import BrookError, Closed, LeaseExpired
from brook.models import Failure, Outcome
from brook.queue.shell import QueueGroup
from brook.records import Job, Recent, Record

if TYPE_CHECKING:
    from brook.core import Core

log = logging.getLogger("brook.delivery")

DUE_FLOOR_MS = 20
"""A due time already past is looked at again no sooner than this (the queue ticker
may not have acted on it yet)."""
PASSED_OVER = Outcome(None, 0.0, "passed over: not an event type the endpoint takes", b"")
"""How a record of an event type the endpoint does not take ends there (acked, unsent)."""


def connections_max(soft_limit: int) -> int:
    """Connections to receivers allowed at once: the default, within a quarter of the
    process's descriptor limit (files and the HTTP server's connections need the rest)."""
    return max(16, min(limits.delivery_connections_max_default, soft_limit // 4))


class Runtime(Lane[QueueGroup]):
    """What the loop keeps for one endpoint: the scheduler's lane, and its statistics."""

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        self.stats = EndpointStats()
        self.stats.failing_since_ms = endpoint.failing_since_ms  # (as stored: restarts)
        self.noting = False
        """A write of when it began failing is under way."""

    def update(self, endpoint: Endpoint) -> None:
        if endpoint.settings.enabled and not self.endpoint.settings.enabled:
            self.stats.failing_since_ms = None  # enabled again: disable_after_ms counts afresh
        super().update(endpoint)


class Deliverer:
    def __init__(
        self,
        core: Core,
        store: EndpointStore,
        resolver: addresses.Resolver = addresses.system_resolver,
        workers: int = 0,
    ) -> None:
        """`workers`: how many processes send the attempts (workers.py); 0: this
        process's delivery loop sends them itself (sender.py), with `resolver`."""
        self.core = core
        self.store = store
        self.reach = store.reach
        connections = connections_max(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        self.sender: Sender | Workers = (
            Workers(workers, self.reach, connections)
            if workers
            else Sender(resolver, self.reach, connections)
        )
        self.scheduler = Scheduler[QueueGroup](
            Runtime, connections, min(limits.delivery_origin_connections_max, connections)
        )
        self.totals = Totals()
        """Attempts over every endpoint since the start (/metrics' aggregates)."""
        self._rng = random.Random()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            limits.delivery_threads, "brook-delivery"
        )
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._acks = Acks(self)
        self._thread: threading.Thread | None = None
        self._wake_pending = False
        self._told: set[str] = set()
        """Endpoints told to look again (from any thread, under _told_mutex)."""
        self._told_topics: set[str] = set()
        """Topics with new records: their endpoints look again (under _told_mutex)."""
        self._told_mutex = threading.Lock()
        self._sweep_now = True
        """Look at every endpoint in the next round (the first one, or a change of many)."""
        self._due: list[tuple[int, str]] = []
        """(when, endpoint): a retry, an expiring lease or a probe comes due (a heap)."""
        self._due_at: dict[str, int] = {}
        """The earliest entry of each endpoint in _due (later entries are stale)."""
        self._hooks: Hooks | None = None
        if not core.read_only:
            store.changed.append(self.wake)
            self._hooks = core.register(Hooks("delivery", on_round=self._records_appended))
            self._thread = core.supervisor.start("delivery", self._run, self._stop)

    # ------------------------------------------------------------ outside

    def wake(self, name: str | None = None) -> None:
        """Look again now at endpoint `name` (changed, redriven), or at every one; from
        any thread."""
        if name is None:
            self._sweep_now = True
        else:
            with self._told_mutex:
                self._told.add(name)
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._woken)

    def _records_appended(self, topics: frozenset[str]) -> None:
        """After each commit round (the syncer's thread): the endpoints of `topics` may
        have records to deliver. Costs nothing without endpoints, and at most one
        wake-up of the loop per round of its own, however many commit rounds pass."""
        if not self.store.has_endpoints():
            return
        store = self.store
        told = [topic for topic in topics if store.has_endpoints_on(topic)]
        if not told:
            return
        with self._told_mutex:
            self._told_topics.update(told)  # the loop finds their endpoints, once a round
        if self._wake_pending:
            return
        loop = self._loop
        if loop is None or loop.is_closed():
            return  # not running: it looks at every endpoint when it starts
        self._wake_pending = True
        try:
            loop.call_soon_threadsafe(self._woken)
        except RuntimeError:  # the loop closed meanwhile
            self._wake_pending = False

    def _woken(self) -> None:
        self._wake_pending = False
        if self._wake is not None:
            self._wake.set()

    def _look_again(self, lane: Lane[QueueGroup]) -> None:
        """On the loop: the lane's state changed (an attempt ended, a lease came back):
        plan for it in another round. Every change of a lane tells it so; a lane that
        nothing changed is not looked at."""
        with self._told_mutex:
            self._told.add(lane.endpoint.name)
        if self._wake is not None:
            self._wake.set()

    def _runtime(self, name: str) -> Runtime | None:
        lane = self.scheduler.lanes.get(name)
        assert lane is None or isinstance(lane, Runtime)
        return lane

    def stats(self, name: str) -> EndpointStats:
        runtime = self._runtime(name)
        return runtime.stats if runtime is not None else EndpointStats()

    def breaker_state(self, name: str) -> str:
        runtime = self._runtime(name)
        return runtime.breaker.state.value if runtime is not None else "closed"

    def next_probe_ms(self, name: str) -> int | None:
        """When the endpoint's open breaker lets a probe through (None unless open)."""
        runtime = self._runtime(name)
        return runtime.breaker.next_probe_ms() if runtime is not None else None

    def recent(self, name: str) -> list[Recent]:
        """Its most recent attempts, newest first (kept in memory since the start)."""
        runtime = self._runtime(name)
        return runtime.stats.recent() if runtime is not None else []

    def failing(self, name: str) -> list[Failure]:
        """What fails for the endpoint now (its own work, or its groups'), oldest first."""
        return self.core.supervisor.isolated(functools.partial(ep.concerns, name))

    def in_flight(self, name: str) -> int:
        runtime = self._runtime(name)
        return runtime.in_flight if runtime is not None else 0

    def stop(self) -> None:
        """Stop the loop (before the queue groups and the committer close)."""
        self._stop.set()
        self.wake()
        if self._thread is not None:
            self._thread.join()
        if self._hooks is not None:
            self.core.unregister(self._hooks)
        with contextlib.suppress(ValueError):
            self.store.changed.remove(self.wake)
        self._pool.shutdown(wait=True)

    def close(self) -> None:
        """Nothing more to close: stop ended the loop and its connections."""

    # ------------------------------------------------------------ the loop

    def _run(self) -> float:
        """One life of the event loop (the supervisor starts another if it fails)."""
        uvloop.run(self._main())
        return 0.0

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._sweep_now = True
        swept = time.monotonic()
        try:
            await self._blocking(self._release_leases)
            while not self._stop.is_set():
                # Cleared before the round, so a wake-up during it (new records, a stop)
                # is not lost: the wait below then returns at once.
                self._wake.clear()
                if time.monotonic() - swept >= limits.delivery_sweep_s:
                    self._sweep_now = True
                    swept = time.monotonic()
                    await self.sender.close_idle()
                started = await self._round()
                if started or self._stop.is_set():
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._idle_wait(swept))
        finally:
            await self._finish()

    def _release_leases(self) -> None:
        """On start: every lease of a delivery group was held by this broker's loop
        before it stopped (nothing else consumes them), so each attempt is over; retry
        the records now rather than when their leases would run out.

        The attempt is given back, not spent: it ended with the broker, not with an
        answer from the endpoint (which may have had the request: at least once). When
        it was spent, a record in flight at each of ten crashes in a row went dead
        although its endpoint never failed (`make reliability`, 100 kills)."""
        supervisor = self.core.supervisor
        for endpoint in self.store.endpoints():
            for group in self.store.groups(endpoint):
                receipts = group.leased_receipts()
                if not receipts:
                    continue
                log.info(
                    "delivery to %s: %d attempts of %s ended with the broker; sending again",
                    endpoint.name,
                    len(receipts),
                    group.topic,
                )
                with (
                    supervisor.isolate("delivery", group.subject, "give back leases"),
                    contextlib.suppress(LeaseExpired),  # some ran out meanwhile
                ):
                    group.settle(receipts, "release", "the broker stopped during the attempt")

    def _idle_wait(self, swept: float) -> float:
        """Seconds until something is due: the earliest due time, or the next sweep."""
        wait = max(0.001, limits.delivery_sweep_s - (time.monotonic() - swept))
        if self._due:
            wait = min(wait, max(0.001, (self._due[0][0] - self.core.now_ms()) / 1000))
        return wait

    async def _finish(self) -> None:
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=limits.delivery_stop_wait_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for lane in self.scheduler.lanes.values():
            unsent = list(lane.ahead)
            lane.ahead.clear()
            with contextlib.suppress(Exception):  # else the next start ends their leases
                await self._release(unsent)
        await self.sender.close()
        self._loop = None

    async def _blocking(self, fn: Callable[[], object]) -> object:
        assert self._loop is not None
        return await self._loop.run_in_executor(self._pool, fn)

    async def _round(self) -> int:
        """Do what the scheduler plans now for the endpoints with something to do;
        how many attempts and leases started."""
        now = self.core.now_ms()
        endpoints, releases = self._to_look_at(now)
        plan = self.scheduler.plan(now, endpoints, self._groups_with_work)
        releases.extend(plan.releases)
        if releases:
            self._spawn(self._release(releases))
        for send in plan.sends:
            self._spawn(self._attempt(send))
        for lease in plan.leases:
            self._spawn(self._lease_ahead(lease, now))
        for endpoint in endpoints:
            lane = self.scheduler.lanes[endpoint.name]
            if not (lane.in_flight or lane.ahead or lane.leasing):
                self._schedule(lane, now)
        return len(plan.sends) + len(plan.leases)

    def _to_look_at(self, now_ms: int) -> tuple[list[Endpoint], list[Ahead[QueueGroup]]]:
        """The endpoints this round looks at: those told (new records, an attempt or a
        lease ended, a change) or come due (every one at a sweep); and the records
        leased ahead for endpoints deleted since."""
        with self._told_mutex:
            names, self._told = self._told, set()
            topics, self._told_topics = self._told_topics, set()
        for topic in topics:
            names |= self.store.endpoints_on(topic)
        due = self._due
        while due and due[0][0] <= now_ms:
            when, name = heapq.heappop(due)
            if self._due_at.get(name) == when:
                del self._due_at[name]
                names.add(name)
        if self._sweep_now:
            self._sweep_now = False
            names.update(endpoint.name for endpoint in self.store.endpoints())
        endpoints: list[Endpoint] = []
        releases: list[Ahead[QueueGroup]] = []
        for name in sorted(names):
            endpoint = self.store.find(name)
            if endpoint is not None:
                endpoints.append(endpoint)
                continue
            self.sender.forget(name)
            gone = self.scheduler.forget(name)
            if gone is not None:
                releases.extend(gone.ahead)
                gone.ahead.clear()
        return endpoints, releases

    def _schedule(self, lane: Lane[QueueGroup], now_ms: int) -> None:
        """Holding nothing under way: look at the endpoint again when time next
        changes something for it (a retry or an expiring lease in one of its groups,
        its breaker's probe), if ever. New records and changes tell it themselves."""
        name = lane.endpoint.name
        dues = [
            due for g in self.store.groups(lane.endpoint) if (due := g.next_due_ms()) is not None
        ]
        probe = lane.breaker.next_probe_ms()
        if probe is not None:
            dues.append(probe)
        if not dues or not lane.endpoint.settings.enabled:
            return
        when = max(min(dues), now_ms + DUE_FLOOR_MS)
        known = self._due_at.get(name)
        if known is None or when < known:
            self._due_at[name] = when
            heapq.heappush(self._due, (when, name))

    def _groups_with_work(self, endpoint: Endpoint) -> list[QueueGroup]:
        return [group for group in self.store.groups(endpoint) if group.has_work()]

    def _keep_failing_since(self, runtime: Runtime, now_ms: int) -> None:
        """Store when the endpoint began failing once it has failed for a while, and
        forget it after a success, so `disable_after_ms` counts across restarts (two
        writes a failing spell at most; a blip of failures writes nothing)."""
        since = runtime.stats.failing_since_ms
        if since is not None and now_ms - since < limits.endpoint_failing_stored_after_ms:
            since = None  # a blip so far
        if runtime.noting or since == runtime.endpoint.failing_since_ms:
            return
        name = runtime.endpoint.name
        runtime.noting = True

        async def note() -> None:
            try:
                await self._blocking(lambda: self.store.note_failing(name, since))
            except BrookError as exc:
                self.core.supervisor.subject_failed("delivery", ep.subject(name), "note", exc)
            finally:
                runtime.noting = False

        self._spawn(note())

    def _spawn(self, work: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _lease_ahead(self, lease: Lease[QueueGroup], asked_at_ms: int) -> None:
        """Lease records for an endpoint to send as it has room. Runs beside the
        rounds, so a slow lease holds up no other endpoint."""
        jobs: list[Job] = []
        try:
            jobs = await self._lease(lease.group, lease.size)
        finally:
            back = self.scheduler.leased(lease.lane, lease.group, jobs, asked_at_ms)
            if back:
                await self._release(back)
            self._look_again(lease.lane)

    async def _release(self, unsent: list[Ahead[QueueGroup]]) -> None:
        """Give records leased ahead back unsent: ready again, no attempt spent."""
        by_group: dict[QueueGroup, list[str]] = {}
        for ahead in unsent:
            by_group.setdefault(ahead.group, []).append(ahead.job.receipt)
        for group, receipts in by_group.items():
            try:
                await self._blocking(functools.partial(group.settle, receipts, "release"))
            except LeaseExpired as exc:
                # Those leases ran out meanwhile: their records are ready again already.
                log.debug("delivery: giving back records of %s: %s", group.topic, exc)
            except BrookError as exc:
                log.warning(
                    "delivery: giving back %d records of %s failed (%s); their leases run out",
                    len(receipts),
                    group.topic,
                    exc,
                )

    async def _lease(self, group: QueueGroup, count: int) -> list[Job]:
        """Up to `count` records of `group`; none when leasing fails (the group's
        failure alone: shown as its endpoint failing, tried again next round)."""
        supervisor = self.core.supervisor
        try:
            jobs = await self._blocking(lambda: group.lease(count, 0, None))
        except Closed:
            raise
        except Exception as exc:
            supervisor.subject_failed("delivery", group.subject, "lease", exc)
            return []
        supervisor.subject_succeeded(group.subject, "lease")
        assert isinstance(jobs, list)
        return jobs

    # ------------------------------------------------------------ one attempt

    async def _attempt(self, send: Send[QueueGroup]) -> None:
        """One attempt. Its slot of the endpoint's budget is held until the answer
        comes (or, when the answer disables the endpoint, until that is stored), not
        while the outcome is made durable: settling waits for a status-log sync."""
        runtime, (group, job, _) = send.lane, send.ahead
        assert isinstance(runtime, Runtime)
        scheduler = self.scheduler
        failed: bool | None = None
        probe = False
        slot = True
        try:
            if not runtime.endpoint.takes(job.record):  # another event type: passed over
                self._acks.add(group, job.receipt, PASSED_OVER)
                return
            while (wait := scheduler.pace(runtime, self.core.now_ms())) > 0:
                await asyncio.sleep(wait / 1000)
            if not scheduler.sendable(send, self.core.now_ms()):
                await self._release([send.ahead])
                return
            probe = scheduler.started(runtime)
            failed = True  # until it is known otherwise
            result = await self._send(runtime.endpoint, job, runtime)
            now = self.core.now_ms()
            settings = runtime.endpoint.settings
            verdict = judge(result, job.attempt, settings.backoff, now, self._rng)
            if verdict.action is not Action.ACK:
                since = runtime.stats.failing_since_ms
                verdict = given_up(
                    verdict, now if since is None else since, settings.disable_after_ms, now
                )
            failed = verdict.action is Action.RETRY
            if failed:  # (its last attempt, or past expiry: dead, and counted so)
                record = job.record
                since = group.since_ms(record.partition, record.offset)
                verdict = final(verdict, job.attempt, group.settings, since, now)
            runtime.stats.record(result, verdict, now, job)
            self.totals.record(result, verdict)
            self._keep_failing_since(runtime, now)
            if verdict.action is not Action.DISABLE:
                slot = False
                for lane in scheduler.ended(runtime, failed, now, probe, result.latency_ms):
                    self._look_again(lane)
                self._look_again(runtime)
            await self._settle(runtime, group, job, result, verdict)
        except Exception as exc:
            self.core.supervisor.subject_failed(
                "delivery", ep.subject(runtime.endpoint.name), "attempt", exc
            )
        finally:
            if slot:
                for lane in scheduler.ended(runtime, failed, self.core.now_ms(), probe):
                    self._look_again(lane)
                self._look_again(runtime)

    def test(self, endpoint: Endpoint) -> Result:
        """Send a signed test request to `endpoint` now, outside every queue (from any
        thread but the loop's); its result."""
        loop = self._loop
        if loop is None:
            return Result(error=ErrorKind.CONNECTION, error_message="delivery is not running")
        record = Record(
            value=msgspec.json.encode({"type": "brook.test", "endpoint": endpoint.name}),
            headers={"content-type": b"application/json"},
            topic="",
            partition=0,
            offset=0,
        )
        job = Job(record, 1, "")
        message_id = f"test:{uuid.uuid4().hex}"

        async def send() -> Result:
            return await self._send(endpoint, job, Runtime(endpoint), message_id)

        future = asyncio.run_coroutine_threadsafe(send(), loop)
        return future.result(
            endpoint.settings.timeout_ms / 1000
            + limits.delivery_connect_timeout_s_max
            + limits.delivery_worker_guard_s
        )

    async def _send(
        self, endpoint: Endpoint, job: Job, runtime: Runtime, message_id: str | None = None
    ) -> Result:
        record = job.record
        message_id = message_id or ep.message_id(record)
        return await self.sender.send(endpoint, record, job.attempt, message_id, self.core.now_ms())

    async def _settle(
        self, runtime: Runtime, group: QueueGroup, job: Job, result: Result, verdict: Verdict
    ) -> None:
        outcome = Outcome(
            result.status,
            round(result.latency_ms, 3),
            "" if result.error is None else f"{result.error.value}: {result.error_message}",
            result.excerpt,
        )
        receipts = [job.receipt]
        action = verdict.action

        if action is Action.ACK:
            self._acks.add(group, job.receipt, outcome)
            return

        def settle() -> None:
            if action is Action.DEAD:
                group.settle(receipts, "discard", verdict.reason, outcome=outcome)
            elif action is Action.RETRY:
                group.settle(receipts, "nack", verdict.reason, verdict.delay_ms, outcome=outcome)
            else:  # DISABLE: the record waits for the endpoint to be enabled again
                group.settle(receipts, *_waiting(job, group, verdict), outcome=outcome)

        supervisor = self.core.supervisor
        try:
            if action is Action.DISABLE:
                # The endpoint first, stored and then known to the loop: the record is
                # still leased, so it cannot go out again before the loop sees the
                # endpoint disabled (nor can the records waiting for their pacing).
                name = runtime.endpoint.name
                disable = functools.partial(self.store.set_enabled, name, False, verdict.reason)
                stored = await self._blocking(disable)
                assert isinstance(stored, Endpoint)
                runtime.update(stored)
            await self._blocking(settle)
            if group.settings.ordering == "key":
                self._look_again(runtime)  # its key's next record is ready only now
        except LeaseExpired:
            # The lease ran out first (a very slow answer): the record is leased again.
            log.info("delivery to %s: %s outlived its lease", runtime.endpoint.name, job.receipt)
        except BrookError as exc:
            # Not stored: the lease runs out and the record is sent again (at least once).
            supervisor.subject_failed("delivery", group.subject, "settle", exc)
        else:
            supervisor.subject_succeeded(group.subject, "settle")


def _waiting(job: Job, group: QueueGroup, verdict: Verdict) -> tuple[str, str, int]:
    """How a record answered by a 410 is settled: it waits, ready again at once (its
    endpoint is disabled, so it goes when enabled again), never dead: its attempt spent
    and shown (a nack) while attempts are left, else given back unspent (a release), so
    a 410 on its last attempt does not make it dead."""
    left = job.attempt < group.settings.max_attempts
    return ("nack" if left else "release"), verdict.reason, 0


class Acks:
    """Acks, settled many per durable write: acks that come while some are written
    go in the next write (group commit, as appends do), those of every group together
    (each group's queued first, then all waited for: one commit round makes them
    durable). Nothing waits for them: the attempt is over when its answer came, and an
    ack lost to a crash only means the record is sent again (at least once)."""

    def __init__(self, deliverer: Deliverer) -> None:
        self.deliverer = deliverer
        self._pending: dict[QueueGroup, dict[str, Outcome]] = {}
        self._writing = False

    def add(self, group: QueueGroup, receipt: str, outcome: Outcome) -> None:
        self._pending.setdefault(group, {})[receipt] = outcome
        if not self._writing:
            self._writing = True
            self.deliverer._spawn(self._write())

    async def _write(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, {}
                await self.deliverer._blocking(functools.partial(self._settle, batch))
        finally:
            self._writing = False

    def _settle(self, batch: dict[QueueGroup, dict[str, Outcome]]) -> None:
        """On a pool thread: queue every group's acks, then wait for each; a group's
        failure is that group's (its records are sent again)."""
        supervisor = self.deliverer.core.supervisor
        begun = []
        for group, acks in batch.items():
            try:
                begun.append(group.settle_begin(list(acks), "ack", outcome=acks))
            except BrookError as exc:
                supervisor.subject_failed("delivery", group.subject, "ack", exc)
        for settling in begun:
            group = settling.group
            try:
                settling.finish()
            except LeaseExpired as exc:
                # Those leases ran out first (their records are leased again); the
                # others were acked.
                log.info("delivery on %s: %s", group.topic, exc)
            except BrookError as exc:
                supervisor.subject_failed("delivery", group.subject, "ack", exc)
            else:
                supervisor.subject_succeeded(group.subject, "ack")
                if group.settings.ordering == "key":
                    # A key's next record is ready only once this ack is durable: the
                    # loop looked when the answer came, and found the key still held.
                    name = ep.group_endpoint(group.group)
                    if name is not None:
                        self.deliverer.wake(name)
