"""The worker: leases an app's jobs, runs each with the function it names, settles it.

The decisions are the ledger's (tasks/ledger.py: dispatch, slots, room, deadlines,
leases to extend); this module is its shell: threads, the broker's calls, the clock.

- **Loops.** Feeders (a few per queue) lease; an ends loop takes the runs that
  ended and hands their slots to the jobs waiting (task threads take no lock: a
  hundred of them contending for the ledger's starved the feeders and settlers);
  settlers ack, nack, discard and release in batches; a deadline loop fails runs
  past `timeout_ms` within milliseconds; a lease loop extends every held job's
  lease. Each runs under
  `brook.supervisor`: an unexpected error is logged and the loop goes on after a
  pause; a loop that keeps failing (`worker_loop_failures_max` in a row) makes the
  worker exit 1 rather than hang on quietly. The broker out of reach is expected:
  the loops wait for it, saying so.
- **Runs.** Sync tasks on up to `concurrency` runner threads, `async def` ones on one
  event loop, `isolation="process"` ones in a child process per slot
  (tasks/isolation.py); at most `concurrency` of them all at once.
- **Timeouts.** At the deadline an async run is cancelled, a process run killed, and
  its attempt failed at once. A thread cannot be stopped: its attempt is failed
  (logged at once, its result dropped), but it keeps its slot, its lease (extended)
  and so its key until it returns, so a retry never runs beside it.
- **Settling.** `done` is logged once the ack is durable; an ack that failed says the
  job will run again.
- **Stopping.** `stop()` (SIGTERM, or the first SIGINT) drains: no more leases, every
  held job finishes and is settled, then `run` returns 0. A second SIGINT exits at
  once; the jobs it held are leased again when their leases run out.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from brook import limits
from brook.api import QueueApi
from brook.errors import BrookError, LeaseExpired
from brook.models import Job
from brook.supervisor import Supervisor, retry_after_s
from brook.tasks import outcomes, payload, revocations
from brook.tasks.announce import Announcer
from brook.tasks.app import App
from brook.tasks.holding import Holding, monotonic_ms
from brook.tasks.isolation import Child
from brook.tasks.ledger import Leased, Ledger, Outcome, Settle
from brook.tasks.metrics import WorkerMetrics
from brook.tasks.running import RunningJobs
from brook.tasks.settling import SettlingJobs
from brook.tasks.stopping import StoppingJobs
from brook.tasks.task import Task

log = logging.getLogger("brook.worker")


_Run = tuple[Holding, float | None]
"""A job for a runner thread, and its deadline."""
_Ended = tuple[Holding, Outcome, float]
"""A run that ended: the job, its outcome, when (ms, monotonic)."""


@dataclass
class _Stats:
    acked: int = 0
    failed: int = 0
    lost_leases: int = 0
    ack_failures: int = 0


class _Feeder:
    """One feeder's memory between leases."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.idle = True
        """Its last lease found nothing: it waits for one job on room of its own."""
        self.failures = 0


class Worker(RunningJobs, SettlingJobs, StoppingJobs):
    def __init__(
        self,
        app: App,
        concurrency: int = 8,
        tasks: list[str] | None = None,
        poll_s: float = 1.0,
        connect_timeout_s: float = limits.worker_connect_timeout_ms_default / 1000,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        chosen = tasks or sorted(app.tasks)
        unknown = [name for name in chosen if name not in app.tasks]
        if unknown:
            raise ValueError(
                f"no task named {', '.join(unknown)} in this app "
                f"(it has: {', '.join(sorted(app.tasks)) or 'none'})"
            )
        if not chosen:
            raise ValueError("the app has no tasks: decorate functions with @app.task")
        if connect_timeout_s < 0:
            raise ValueError("connect_timeout_s must be at least 0 (0: wait forever)")
        self.app = app
        self._hooks = app.hooks
        self.concurrency = concurrency
        self.tasks = [app.tasks[name] for name in chosen]
        for task in self.tasks:
            if task.isolation == "process":
                _check_importable(task)
        self.topics = sorted({task.topic for task in self.tasks})
        self.poll_s = poll_s
        self.connect_timeout_s = connect_timeout_s
        self.stats = _Stats()
        self._lanes = max(
            1 if concurrency < 4 else 2, min(limits.worker_lanes_max, concurrency // 16)
        )
        """Leases (and acks) in flight at once per queue: a round trip to the broker
        waits for a durable write, so one at a time would leave the slots idle."""
        self.ledger = Ledger(
            concurrency,
            runs=chosen,
            declared=app.tasks,
            timeouts_ms={task.name: task.timeout_ms for task in app.tasks.values()},
            feeders=self._lanes * len(self.topics),
            deadline_at_begin=[t.name for t in app.tasks.values() if t.isolation == "process"],
        )
        self._share = min(limits.queue_lease_records_max, -(-self.ledger.room_max // self._lanes))
        """Most jobs one feeder reserves room for in one lease."""
        self._batch_min = max(1, self._share // 2)
        """A feeder leases for at least this many, unless it waited limits.worker_gather_s."""
        self._lock = threading.Condition()
        """Guards the ledger and the held jobs; feeders wait on it for room."""
        self._holding: dict[str, Holding] = {}
        self._queues: dict[str, QueueApi] = {}
        self._visibility_ms: dict[str, int] = {}
        self._max_attempts: dict[str, int] = {}
        """Per queue, as claimed: an attempt that fails at it ends the job (on_failure)."""
        self._stopping = threading.Event()
        self._loops_stop = threading.Event()
        """Set once drained: the settle, deadline and lease loops end."""
        self._deadlines_wake = threading.Event()
        self._leases_wake = threading.Event()
        self._leases_asleep_until = 0.0
        """Until when the lease loop sleeps (0 while it works): a lease wakes it only if
        the new jobs' first extension falls due before that."""
        self._ended = queue.SimpleQueue[_Ended | None]()
        """Runs that ended, for the ends loop (it alone applies them to the ledger)."""
        self._finished = queue.SimpleQueue[Settle | None]()
        """Jobs to settle, for the settlers; read only with get() and get_nowait(),
        never a timed get: on CPython 3.11 that can block forever when several consumers
        race for an item (the timeout it recomputes goes negative, which means none)."""
        self._runs = queue.SimpleQueue[_Run | None]()
        """Sync and process jobs for the runner threads (a thread a slot, started as
        needed): a C queue, not an executor, whose Future per job cost a third of the
        worker's CPU with no-op jobs."""
        self._runners: list[threading.Thread] = []
        self._idle_runners = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._async_runs: dict[str, asyncio.Task[None]] = {}
        self._children: dict[str, Child] = {}
        """The child process running each process-isolated job now, by receipt."""
        self._idle_children: list[Child] = []
        names = [task.name for task in self.tasks]
        self.metrics = (
            None if metrics_port is None else WorkerMetrics(names, concurrency, self._in_flight)
        )
        """The worker's Prometheus series (tasks/metrics.py), served on `metrics_port`."""
        self._metrics_at = (metrics_host, metrics_port)
        self._revoked: dict[str, str] = {}
        """Receipts of runs revoked while running (tasks/revocations.py): the reason
        they are settled dead with when they end, whatever the run returned."""
        self._supervisor = Supervisor()
        self._interrupts = 0
        self._last_lease_s = time.monotonic()
        self._exit_code = 0

    # ------------------------------------------------------------ running

    def run(self, install_signals: bool = True) -> int:
        """Work until `stop()` (or SIGTERM/SIGINT); 0 once drained, 1 when a loop kept
        failing. Raises BrookError when the broker cannot be reached within
        `connect_timeout_s` of the start."""
        if install_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
            signal.signal(signal.SIGINT, lambda *_: self._interrupted())
        self._hooks.call("on_worker_start", None)
        self._connect()
        announcer = Announcer(
            lambda: self.app.broker, [t.name for t in self.tasks], self.concurrency, self._running
        )
        metrics_server = None
        if self.metrics is not None:
            host, port = self._metrics_at
            assert port is not None
            metrics_server = self.metrics.serve(host, port)
        if any(task.is_async for task in self.tasks):
            self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=self._loop.run_forever, name="brook-async", daemon=True
            )
            self._loop_thread.start()
        loops = [
            self._supervisor.start(f"settle-{n}", self._settle_step, self._loops_stop, _no_wait)
            for n in range(self._lanes)
        ]
        loops.append(self._supervisor.start("ends", self._ends_step, self._loops_stop, _no_wait))
        loops.append(
            self._supervisor.start(
                "deadlines", self._deadlines_step, self._loops_stop, self._deadlines_wake_wait
            )
        )
        loops.append(
            self._supervisor.start(
                "leases", self._leases_step, self._loops_stop, self._leases_wake_wait
            )
        )
        loops.append(
            self._supervisor.start(
                "announce", announcer.step, self._loops_stop, self._loops_stop.wait
            )
        )
        loops.append(
            self._supervisor.start(
                "revocations",
                revocations.Reader(lambda: self.app.broker, self._revoked_run).step,
                self._loops_stop,
                self._loops_stop.wait,
            )
        )
        feeders = [
            self._supervisor.start(
                f"feed-{topic}-{n}",
                functools.partial(self._feed_step, _Feeder(topic)),
                self._stopping,
                self._stopping.wait,
            )
            for topic in self.topics
            for n in range(self._lanes)
        ]
        log.info(
            "worker started: %d tasks on %d queues, concurrency %d",
            len(self.tasks),
            len(self.topics),
            self.concurrency,
            extra={"tasks": [t.name for t in self.tasks], "pid": os.getpid()},
        )
        self._watch()
        for feeder in feeders:
            feeder.join()
        self._drain()
        self._loops_stop.set()
        self._ended.put(None)
        for _ in range(self._lanes):
            self._finished.put(None)
        self._deadlines_wake.set()
        self._leases_wake.set()
        for loop in loops:
            loop.join()
        for _ in self._runners:
            self._runs.put(None)
        for runner in self._runners:
            runner.join()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            assert self._loop_thread is not None
            self._loop_thread.join()
            self._loop.close()
        for child in [*self._idle_children, *self._children.values()]:
            child.close()
        announcer.last_word()
        if metrics_server is not None:
            metrics_server.shutdown()
            metrics_server.server_close()
        log.info(
            "worker drained: %d jobs done, %d failed",
            self.stats.acked,
            self.stats.failed,
            extra={"pid": os.getpid()},
        )
        return self._exit_code

    def stop(self) -> None:
        """Drain: lease no more, finish and settle what is held, then `run` returns."""
        self._stopping.set()
        with self._lock:
            self._lock.notify_all()

    def health(self) -> dict[str, Any]:
        """Loops failing, slots busy, jobs held, seconds since the last lease found jobs."""
        with self._lock:
            busy, held = self.ledger.busy, len(self.ledger.held)
        return {
            "failing": [f.loop for f in self._supervisor.failing()],
            "slots_busy": busy,
            "slots": self.concurrency,
            "held": held,
            "last_lease_s": round(time.monotonic() - self._last_lease_s, 1),
        }

    def _interrupted(self) -> None:
        self._interrupts += 1
        if self._interrupts > 1:
            log.warning("second interrupt: stopping now; held jobs run again elsewhere")
            os._exit(130)
        log.info("interrupt: draining (interrupt again to stop at once)")
        self.stop()

    def _watch(self) -> None:
        """Until stopped: log health now and then; stop with exit 1 once a loop keeps
        failing (a worker that cannot lease or settle must not look alive)."""
        next_health = time.monotonic() + limits.worker_health_log_ms / 1000
        while not self._stopping.wait(0.5):
            broken = [
                f for f in self._supervisor.failing() if f.count >= limits.worker_loop_failures_max
            ]
            if broken:
                log.error(
                    "worker loop %s failed %d times in a row (%s): stopping with exit 1",
                    broken[0].loop,
                    broken[0].count,
                    broken[0].error,
                )
                self._exit_code = 1
                self.stop()
            elif time.monotonic() >= next_health:
                next_health = time.monotonic() + limits.worker_health_log_ms / 1000
                health = self.health()
                log.info(
                    "worker health: %d of %d slots busy, %d jobs held, last lease %.0f s ago",
                    health["slots_busy"],
                    health["slots"],
                    health["held"],
                    health["last_lease_s"],
                    extra={"health": health, "pid": os.getpid()},
                )

    def _drain(self) -> None:
        """Wait until every held job ran and was settled (a loop that keeps failing
        cannot settle: then wait no more than a lease's length)."""
        longest_s = max(self._visibility_ms.values(), default=30_000) / 1000
        give_up: float | None = None
        with self._lock:
            while self.ledger.held:
                if self._exit_code:
                    give_up = give_up or time.monotonic() + longest_s
                    if time.monotonic() >= give_up:
                        log.error("%d held jobs not settled: they run again", len(self.ledger.held))
                        return
                self._lock.wait(0.1)

    def _connect(self) -> None:
        """Open each queue, writing this worker's settings where they differ from the
        stored ones (and saying what changed), and store the periodic schedules. While
        the broker cannot be reached, try again with a pause, saying so, for up to
        `connect_timeout_s` (0: forever)."""
        deadline = time.monotonic() + self.connect_timeout_s
        failures = 0
        while True:
            try:
                for topic in self.topics:
                    if topic not in self._queues:
                        queue_api, _ = self.app.claim_queue(topic)  # (it logs what changed)
                        settings = queue_api.settings()
                        self._visibility_ms[topic] = int(settings["visibility_timeout_ms"])
                        self._max_attempts[topic] = int(settings["max_attempts"])
                        self._queues[topic] = queue_api
                self.app.sync_schedules([task.name for task in self.tasks])
                return
            except BrookError as exc:
                if exc.status < 500:
                    raise
                failures += 1
                pause = retry_after_s(failures)
                if self.connect_timeout_s:
                    # The last try is at the deadline, so the whole wait asked for is used.
                    pause = min(pause, deadline - time.monotonic())
                if self.connect_timeout_s and pause <= 0:
                    raise type(exc)(
                        f"the broker at {self.app.location} could not be reached within "
                        f"{self.connect_timeout_s:g} s ({exc.message})"
                    ) from None
                log.warning(
                    "the broker at %s cannot be reached (%s); trying again in %.1f s",
                    self.app.location,
                    exc.message,
                    pause,
                )
                if self._stopping.wait(pause):
                    raise type(exc)("stopped before the broker could be reached") from None

    # ------------------------------------------------------------ leasing

    def _feed_step(self, feeder: _Feeder) -> float:
        """One lease of `feeder`'s queue; the seconds to pause (0: lease again)."""
        idle = feeder.idle
        with self._lock:
            asked = self.ledger.reserve(1, idle=True) if idle else 0
            if not asked:
                idle = False
                asked = self._reserve_room()
            if not asked:
                return 0.0  # stopping
        jobs: list[Job] = []
        try:
            # Room reserved is held for one round trip only, never for a wait: a busy
            # feeder takes what is there now, and waits (for one) as an idle one.
            jobs = self._queues[feeder.topic].lease(
                max_records=asked, timeout=self.poll_s if idle else 0.0
            )
            feeder.failures = 0
        except BrookError as exc:
            feeder.failures += 1
            pause = min(limits.worker_feed_retry_s_max, retry_after_s(feeder.failures))
            log.warning("leasing from %s failed (%s); again in %.1f s", feeder.topic, exc, pause)
            return pause
        finally:
            self._take(feeder.topic, jobs, asked, idle)
        feeder.idle = not jobs
        return 0.0

    def _reserve_room(self) -> int:
        """Room for a busy feeder's next lease (waits for some; 0 when stopping)."""
        ledger = self.ledger
        while ledger.room <= 0 and not self._stopping.is_set():
            self._lock.wait()
        # While jobs run, wait a moment for more room: one lease of many costs what
        # one lease of one does.
        deadline = time.monotonic() + limits.worker_gather_s
        while ledger.room < self._batch_min and ledger.busy and not self._stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._lock.wait(remaining)
        if self._stopping.is_set():
            return 0
        return ledger.reserve(min(ledger.room, self._share))

    def _take(self, topic: str, jobs: list[Job], asked: int, idle: bool) -> None:
        """Hold the jobs a lease brought (they run, even if a drain began meanwhile)."""
        holdings = [self._holding_of(topic, job) for job in jobs]
        leased = [self._leased(holding) for holding in holdings]
        with self._lock:
            now = monotonic_ms()
            to_settle = self.ledger.leased(leased, asked, idle, now)
            for holding in holdings:
                self._holding[holding.job.receipt] = holding
            starting = self.ledger.startable(now)
            self._lock.notify_all()
        if jobs:
            self._last_lease_s = time.monotonic()
            if self._leases_asleep_until > monotonic_ms() + self._visibility_ms[topic] / 3:
                self._leases_wake.set()  # its first extension falls due before the loop wakes
        for settle in to_settle:
            self._finished.put(settle)
        self._dispatch(starting)

    def _holding_of(self, topic: str, job: Job) -> Holding:
        try:
            call = payload.decode_job(job.record.value, job.record.headers)
        except ValueError as exc:
            return Holding(job, topic, None, None, str(exc))
        task = self.app.tasks.get(call.task) if call.task in self.ledger.runs else None
        return Holding(job, topic, call, task)

    def _leased(self, holding: Holding) -> Leased:
        job, call = holding.job, holding.call
        return Leased(
            job.receipt,
            holding.topic,
            call.task if call is not None else None,
            job.record.key,
            self._visibility_ms[holding.topic],
            holding.problem,
            (job.record.partition, job.record.offset),
        )

    # ------------------------------------------------------------ one job

    _failed = staticmethod(outcomes.of_error)

    def _ends_step(self) -> float:
        """Take the runs that ended (waits for the first, then takes all there are):
        to be settled, their slots and room to the jobs waiting, in one turn of the
        lock; a None (once drained) ends the loop."""
        first = self._ended.get()
        if first is None:
            return 0.0
        ended = [first]
        while True:
            try:
                more = self._ended.get_nowait()
            except queue.Empty:
                break
            if more is None:
                self._ended.put(None)
                break
            ended.append(more)
        with self._lock:
            ledger = self.ledger
            revoked = self._revoked
            settles = [
                ledger.returned(
                    h.job.receipt,
                    at,
                    outcome
                    if h.job.receipt not in revoked
                    else Outcome("discard", reason=revoked.pop(h.job.receipt)),
                )
                for h, outcome, at in ended
            ]
            starting = ledger.startable(monotonic_ms())
            self._lock.notify_all()  # room for the feeders
        for settle in settles:
            self._finished.put(settle)
        self._dispatch(starting)
        return 0.0

    # ------------------------------------------------------------ deadlines

    def _deadlines_wake_wait(self, seconds: float) -> None:
        self._deadlines_wake.wait(seconds)
        self._deadlines_wake.clear()

    # ------------------------------------------------------------ leases kept

    def _leases_step(self) -> float:
        """Extend the leases due; the seconds until the next falls due."""
        with self._lock:
            due = self.ledger.due_extensions(monotonic_ms())
        for topic, receipts in due.items():
            visibility = self._visibility_ms[topic]
            sent = monotonic_ms()
            jobs = [self._holding[r].job for r in receipts if r in self._holding]
            try:
                self._queues[topic].extend(jobs, visibility)
            except LeaseExpired as exc:
                # The live ones were extended; the others are gone (they run again).
                self.stats.lost_leases += 1
                log.warning("a held job's lease ended before it was extended: %s", exc)
            except BrookError as exc:
                log.warning("extending leases failed (%s); trying again", exc)
                return retry_after_s(1)
            with self._lock:
                self.ledger.extended(receipts, sent + visibility)
        with self._lock:
            following = self.ledger.next_extension_ms()
        return (
            limits.worker_idle_wake_s
            if following is None
            else max(0.0, (following - monotonic_ms()) / 1000)
        )

    def _leases_wake_wait(self, seconds: float) -> None:
        self._leases_asleep_until = monotonic_ms() + seconds * 1000
        self._leases_wake.wait(seconds)
        self._leases_wake.clear()
        self._leases_asleep_until = 0.0

    # ------------------------------------------------------------ settling


def _no_wait(seconds: float) -> None:
    """The settlers wait on their queue, not between steps."""


def _check_importable(task: Task[Any, Any]) -> None:
    """A process-isolated task's child finds the function by module and name: it must
    be a module-level function."""
    if "<locals>" in task.fn.__qualname__ or task.fn.__module__ == "__main__":
        raise ValueError(
            f'task {task.name}: isolation="process" needs a function defined at the top '
            "of an importable module (its child process imports it by name)"
        )
