"""The delivery loop: leases records from every endpoint's queue groups and posts
them to the endpoint, each endpoint isolated from the others (SPEC §7).

One asyncio event loop on a thread of its own (supervised: "delivery"). Each
round asks the scheduler (scheduler.py: which attempts start, which groups to
lease from, which records to give back) and does what its plan says, every
lease, send and settlement a task of its own, so a slow or failing endpoint
holds only its own budget: the others' attempts never wait behind it.

Leasing and settling wait for the status log to be durable, so they run on a
pool of threads; the HTTP requests are the loop's (aiohttp, a connection pool per
endpoint, no redirects followed, at most EXCERPT_BYTES_MAX of an answer read; httpx,
which the clients use, managed 600 requests/s over 16 connections where aiohttp does
15,000).
Every attempt resolves the endpoint's host and checks each address (addresses.py)
before it connects, and then connects to the address it checked.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import random
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import aiohttp
import msgspec
import uvloop

from brook.delivery import addresses
from brook.delivery import endpoint as ep
from brook.delivery.endpoint import Endpoint
from brook.delivery.outcome import (
    EXCERPT_BYTES_MAX,
    Action,
    ErrorKind,
    Result,
    Verdict,
    judge,
)
from brook.delivery.request import Target
from brook.delivery.scheduler import Ahead, Lane, Lease, Scheduler, Send
from brook.delivery.stats import EndpointStats, Recent
from brook.delivery.store import EndpointStore
from brook.errors import BrookError, Closed, LeaseExpired
from brook.queue.lifecycle import Outcome
from brook.queue.shell import QueueGroup
from brook.records import Job, Record
from brook.supervisor import Failure

if TYPE_CHECKING:
    from brook.core import Core

log = logging.getLogger("brook.delivery")

IDLE_WAIT_S = 0.5
"""With nothing to do, the loop looks again at least this often (retries come due)."""
RECONCILE_S = 2.0
"""How often topics made since are given their endpoints' groups."""
THREADS = 32
CONNECT_TIMEOUT_S_MAX = 10.0
STOP_WAIT_S = 5.0
"""On stop, attempts in flight get this long to finish; the rest are retried later."""


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to (blocking: run off the loop)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


class Runtime(Lane[QueueGroup]):
    """What the loop keeps for one endpoint: the scheduler's lane, and its HTTP
    client and statistics."""

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        self.stats = EndpointStats()
        self.client: aiohttp.ClientSession | None = None
        self._target: Target | None = None

    def target(self) -> Target:
        """What every attempt to the endpoint shares, for its settings as they stand."""
        if self._target is None or self._target.endpoint is not self.endpoint:
            self._target = Target(self.endpoint)
        return self._target

    def update(self, endpoint: Endpoint) -> None:
        old = self.endpoint.settings
        super().update(endpoint)
        if (
            endpoint.settings.max_in_flight != old.max_in_flight
            or endpoint.settings.timeout_ms != old.timeout_ms
        ) and self.client is not None:
            client, self.client = self.client, None
            asyncio.get_running_loop().create_task(client.close())

    def http(self) -> aiohttp.ClientSession:
        """The endpoint's HTTP client: its own pool of connections, at most
        max_in_flight, never following redirects (each request says so)."""
        if self.client is None:
            settings = self.endpoint.settings
            timeout = settings.timeout_ms / 1000
            self.client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=settings.max_in_flight, limit_per_host=settings.max_in_flight
                ),
                timeout=aiohttp.ClientTimeout(
                    total=timeout, connect=min(timeout, CONNECT_TIMEOUT_S_MAX)
                ),
                trust_env=False,
                auto_decompress=False,
            )
        return self.client


class Deliverer:
    def __init__(
        self,
        core: Core,
        store: EndpointStore,
        resolver: addresses.Resolver = system_resolver,
    ) -> None:
        self.core = core
        self.store = store
        self.resolver = resolver
        self.allow_private = store.allow_private
        self.scheduler = Scheduler[QueueGroup](Runtime)
        self._rng = random.Random()
        self._pool = concurrent.futures.ThreadPoolExecutor(THREADS, "brook-delivery")
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._acks: dict[tuple[str, str], Acks] = {}
        self._thread: threading.Thread | None = None
        self._reconcile_now = False
        self._wake_pending = False
        if not core.read_only:
            store.changed.append(self.wake)
            core.round_listeners.append(self._records_appended)
            core.topic_created_hooks.append(self._topic_created)
            self._thread = core.supervisor.start("delivery", self._run, self._stop)

    # ------------------------------------------------------------ outside

    def wake(self) -> None:
        """Look again now (a changed endpoint, a stop); from any thread."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._woken)

    def _records_appended(self) -> None:
        """After each commit round (the syncer's thread): new records may be
        deliverable. Costs nothing without endpoints, and at most one wake-up of the
        loop per round of its own, however many commit rounds pass meanwhile."""
        if self._wake_pending or not self.store.has_endpoints():
            return
        loop = self._loop
        if loop is None or loop.is_closed():
            return  # not running: it looks at every group when it starts
        self._wake_pending = True
        try:
            loop.call_soon_threadsafe(self._woken)
        except RuntimeError:  # the loop closed meanwhile
            self._wake_pending = False

    def _woken(self) -> None:
        self._wake_pending = False
        if self._wake is not None:
            self._wake.set()

    def _look_again(self) -> None:
        """On the loop: plan another round (an attempt ended, a lease came back)."""
        if self._wake is not None:
            self._wake.set()

    def _topic_created(self, topic: str) -> None:
        """On the writer role: a new topic may need its endpoints' groups now."""
        self._reconcile_now = True
        self.wake()

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
        with contextlib.suppress(ValueError):
            self.core.round_listeners.remove(self._records_appended)
            self.core.topic_created_hooks.remove(self._topic_created)
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
        reconciled = 0.0
        try:
            await self._blocking(self._release_leases)
            while not self._stop.is_set():
                # Cleared before the round, so a wake-up during it (new records, a stop)
                # is not lost: the wait below then returns at once.
                self._wake.clear()
                if self._reconcile_now or time.monotonic() - reconciled >= RECONCILE_S:
                    self._reconcile_now = False
                    await self._blocking(self.store.reconcile)
                    reconciled = time.monotonic()
                started = await self._round()
                if started or self._stop.is_set():
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._idle_wait())
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

    def _idle_wait(self) -> float:
        now = self.core.now_ms()
        waits = [IDLE_WAIT_S]
        for lane in self.scheduler.lanes.values():
            probe = lane.breaker.next_probe_ms()
            if probe is not None:
                waits.append(max(0.001, (probe - now) / 1000))
        return min(waits)

    async def _finish(self) -> None:
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_WAIT_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for lane in self.scheduler.lanes.values():
            unsent = list(lane.ahead)
            lane.ahead.clear()
            with contextlib.suppress(Exception):  # else the next start ends their leases
                await self._release(unsent)
            assert isinstance(lane, Runtime)
            if lane.client is not None:
                await lane.client.close()
                lane.client = None
        self._loop = None

    async def _blocking(self, fn: Callable[[], object]) -> object:
        assert self._loop is not None
        return await self._loop.run_in_executor(self._pool, fn)

    async def _round(self) -> int:
        """Do what the scheduler plans now; how many attempts and leases started."""
        now = self.core.now_ms()
        plan = self.scheduler.plan(now, self.store.endpoints(), self._groups_with_work)
        for lane in plan.dropped:
            assert isinstance(lane, Runtime)
            if lane.client is not None:
                self._spawn(lane.client.close())
        if plan.releases:
            self._spawn(self._release(plan.releases))
        for send in plan.sends:
            self._spawn(self._attempt(send))
        for lease in plan.leases:
            self._spawn(self._lease_ahead(lease, now))
        return len(plan.sends) + len(plan.leases)

    def _groups_with_work(self, endpoint: Endpoint) -> list[QueueGroup]:
        return [group for group in self.store.groups(endpoint) if group.has_work()]

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
            self._look_again()

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
            while (wait := scheduler.pace(runtime, self.core.now_ms())) > 0:
                await asyncio.sleep(wait / 1000)
            if not scheduler.sendable(send, self.core.now_ms()):
                await self._release([send.ahead])
                return
            probe = scheduler.started(runtime)
            failed = True  # until it is known otherwise
            result = await self._send(runtime.endpoint, job, runtime)
            now = self.core.now_ms()
            verdict = judge(result, job.attempt, runtime.endpoint.settings.backoff, now, self._rng)
            failed = verdict.action is Action.RETRY
            runtime.stats.record(result, verdict, now, job)
            if verdict.action is not Action.DISABLE:
                slot = False
                scheduler.ended(runtime, failed, now, probe, result.latency_ms)
                self._look_again()
            await self._settle(runtime, group, job, result, verdict)
        except Exception as exc:
            self.core.supervisor.subject_failed(
                "delivery", ep.subject(runtime.endpoint.name), "attempt", exc
            )
        finally:
            if slot:
                scheduler.ended(runtime, failed, self.core.now_ms(), probe)
                self._look_again()

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
            runtime = Runtime(endpoint)
            try:
                return await self._send(endpoint, job, runtime, message_id)
            finally:
                if runtime.client is not None:
                    await runtime.client.close()

        future = asyncio.run_coroutine_threadsafe(send(), loop)
        return future.result(endpoint.settings.timeout_ms / 1000 + CONNECT_TIMEOUT_S_MAX)

    async def _send(
        self, endpoint: Endpoint, job: Job, runtime: Runtime, message_id: str | None = None
    ) -> Result:
        record = job.record
        target = runtime.target()
        started = time.monotonic()
        try:
            address = await self._pick(target)
        except addresses.Refused as exc:
            return Result(error=ErrorKind.ADDRESS, error_message=str(exc))
        except OSError as exc:
            return Result(
                error=ErrorKind.DNS, error_message=f"{target.host}: {exc.strerror or exc}"
            )
        message_id = message_id or f"{record.topic}:{record.partition}:{record.offset}"
        headers = target.headers_for(record, job.attempt, message_id, self.core.now_ms())
        client = runtime.http()
        try:
            async with client.post(
                target.url(address),
                data=record.value,
                headers=headers,
                allow_redirects=False,
                server_hostname=target.host if target.scheme == "https" else None,
            ) as response:
                excerpt = await response.content.read(EXCERPT_BYTES_MAX)
                status = response.status
                retry_after = response.headers.get("retry-after")
        except TimeoutError:
            return Result(
                error=ErrorKind.TIMEOUT,
                error_message=f"no answer within {endpoint.settings.timeout_ms} ms",
                latency_ms=_ms_since(started),
            )
        except (aiohttp.ClientSSLError, ssl.SSLError) as exc:
            return Result(
                error=ErrorKind.TLS, error_message=_first_line(exc), latency_ms=_ms_since(started)
            )
        except aiohttp.ClientConnectorError as exc:
            return Result(
                error=ErrorKind.CONNECTION,
                error_message=_first_line(exc),
                latency_ms=_ms_since(started),
            )
        except (
            aiohttp.ServerDisconnectedError,
            aiohttp.ClientPayloadError,
            aiohttp.ClientResponseError,
        ) as exc:
            return Result(
                error=ErrorKind.PROTOCOL,
                error_message=_first_line(exc),
                latency_ms=_ms_since(started),
            )
        except (aiohttp.ClientError, OSError) as exc:
            return Result(
                error=ErrorKind.CONNECTION,
                error_message=_first_line(exc),
                latency_ms=_ms_since(started),
            )
        return Result(
            status=status,
            latency_ms=_ms_since(started),
            retry_after=retry_after,
            excerpt=excerpt[:EXCERPT_BYTES_MAX],
        )

    async def _pick(self, target: Target) -> str:
        """The address to connect to, checked (addresses.pick): a name is resolved
        again for every attempt, so one that later resolves to a private address is
        refused too; an address in the URL is checked once."""
        assert self._loop is not None
        host, port = target.host, target.port
        if target.literal:
            if target.address is None:
                target.address = addresses.pick(host, port, self.resolver, self.allow_private)
            return target.address
        found = await self._loop.run_in_executor(self._pool, self.resolver, host, port)
        return addresses.pick(host, port, lambda h, p: found, self.allow_private)

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
            acks = self._acks.get((group.topic, group.group))
            if acks is None or acks.group is not group:
                acks = self._acks[(group.topic, group.group)] = Acks(self, group)
            acks.add(job.receipt, outcome)
            return

        def settle() -> None:
            if action is Action.DEAD:
                group.settle(receipts, "discard", verdict.reason, outcome=outcome)
            elif action is Action.RETRY:
                group.settle(receipts, "nack", verdict.reason, verdict.delay_ms, outcome=outcome)
            else:  # DISABLE: the record waits, its attempt spent
                group.settle(receipts, "nack", verdict.reason, 0, outcome=outcome)
                disabled.append(
                    self.store.set_enabled(runtime.endpoint.name, False, verdict.reason)
                )

        disabled: list[Endpoint] = []
        supervisor = self.core.supervisor
        try:
            await self._blocking(settle)
            if disabled:  # at once: attempts waiting for their pacing must not go out
                runtime.update(disabled[0])
        except LeaseExpired:
            # The lease ran out first (a very slow answer): the record is leased again.
            log.info("delivery to %s: %s outlived its lease", runtime.endpoint.name, job.receipt)
        except BrookError as exc:
            # Not stored: the lease runs out and the record is sent again (at least once).
            supervisor.subject_failed("delivery", group.subject, "settle", exc)
        else:
            supervisor.subject_succeeded(group.subject, "settle")


class Acks:
    """A group's acks, settled many per durable write: acks that come while one is
    written go in the next (group commit, as appends do). Nothing waits for them: the
    attempt is over when its answer came, and an ack lost to a crash only means the
    record is sent again (at least once)."""

    def __init__(self, deliverer: Deliverer, group: QueueGroup) -> None:
        self.deliverer = deliverer
        self.group = group
        self._pending: dict[str, Outcome] = {}
        self._writing = False

    def add(self, receipt: str, outcome: Outcome) -> None:
        self._pending[receipt] = outcome
        if not self._writing:
            self._writing = True
            self.deliverer._spawn(self._write())

    async def _write(self) -> None:
        group = self.group
        supervisor = self.deliverer.core.supervisor
        try:
            while self._pending:
                batch, self._pending = self._pending, {}
                try:
                    await self.deliverer._blocking(
                        functools.partial(group.settle, list(batch), "ack", outcome=batch)
                    )
                except LeaseExpired as exc:
                    # Those leases ran out first (their records are leased again); the
                    # others were acked.
                    log.info("delivery on %s: %s", group.topic, exc)
                except BrookError as exc:
                    # Their leases run out and the records are sent again (at least once).
                    supervisor.subject_failed("delivery", group.subject, "ack", exc)
                else:
                    supervisor.subject_succeeded(group.subject, "ack")
        finally:
            self._writing = False


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
