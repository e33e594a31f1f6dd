"""The worker: leases an app's jobs, runs them, settles them. One process.

- **Slots.** At most `concurrency` jobs run at once: sync tasks on a thread pool of
  that many threads, `async def` tasks on one event loop thread (a semaphore of that
  many). Prefetch is bounded: the worker holds at most four jobs per slot (one
  running, the rest leased and waiting for it, their leases kept; Celery's default
  prefetch), and one more per feeder of a task waiting for jobs. Busy feeders
  reserve room before they lease, so a lease in flight never leaves a slot idle. A
  few feeder threads per task (more for more slots) lease in turn; one whose last
  lease found nothing waits for one job with a room of its own, so an idle task
  keeps no room from a busy one and a busy one none from an idle one.
- **Leases.** While a job runs, a heartbeat extends its lease every third of the
  visibility timeout, so a long job is never handed to a second worker; if the
  worker dies, the heartbeat stops and the job is leased again when it expires.
- **Settling.** A return acks the job with its result (JSON, kept by the group for
  `app.job`); `Retry` nacks it (after its delay or the backoff), `Discard` makes it
  dead, any other exception nacks it with the error (type, message, the innermost
  frames). Finished jobs are settled in batches by one thread.
- **Timeouts.** An async task past `timeout_ms` is cancelled; a sync one cannot be
  stopped from outside, so its attempt is failed (nacked) and whatever it returns
  later is dropped; its slot is busy until it does return.
- **Stopping.** `stop()` (SIGTERM, or the first SIGINT) drains: no more leases,
  every held job finishes and is settled, then `run` returns 0. A second SIGINT
  exits at once; the jobs it held are leased again when their leases run out.
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from brook import limits
from brook.errors import BrookError, LeaseExpired
from brook.models import Job
from brook.tasks import payload
from brook.tasks.app import App, Discard, JobRef, Retry, Task

log = logging.getLogger("brook.worker")

SETTLE_BATCH_MAX = 500
"""Most finished jobs one ack call settles."""
LANES_MAX = 4
HELD_PER_SLOT = 4
GATHER_S = 0.005
"""How long a feeder waits for more free slots (while jobs run), and the settler for
more finished jobs, before one call for all of them."""
GATHER_POLL_S = 0.0005
"""How often a settler gathering a batch looks for more finished jobs."""


@dataclass
class _Running:
    task: Task[Any, Any]
    job: Job
    reserved: bool
    """Its room was reserved (it counts in the worker's free room until it ends)."""
    started: float | None = None
    """When a thread (or the event loop) began it; None while it waits for one."""
    abandoned: bool = False
    """Its attempt was failed for running past timeout_ms; its return is dropped."""


@dataclass
class _Outcome:
    task: Task[Any, Any]
    job: Job
    action: str
    """ack, nack or discard."""
    result: bytes | None = None
    reason: str = ""
    delay_ms: int | None = None
    ms: float = 0.0


@dataclass
class _Stats:
    acked: int = 0
    failed: int = 0
    lost_leases: int = 0


class Worker:
    def __init__(
        self,
        app: App,
        concurrency: int = 8,
        tasks: list[str] | None = None,
        poll_s: float = 1.0,
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
        self.app = app
        self.concurrency = concurrency
        self.tasks = [app.tasks[name] for name in chosen]
        self.poll_s = poll_s
        self.stats = _Stats()
        self._slots = threading.Condition()
        self._free = HELD_PER_SLOT * concurrency
        """Jobs the worker may still take: it holds at most HELD_PER_SLOT per slot (one
        running, one leased and waiting for a thread), so it never holds more than it
        will start soon, yet a lease in flight does not leave a slot idle."""
        self._lanes = max(1, min(LANES_MAX, concurrency // 16))
        """Leases (and acks) in flight at once per task: a round trip to the broker
        waits for a durable write, so one at a time would leave the slots idle."""
        self._share = min(
            limits.queue_lease_records_max, -(-HELD_PER_SLOT * concurrency // self._lanes)
        )
        """Most jobs one feeder reserves room for in one lease."""
        self._batch_min = max(1, self._share // 2)
        """A feeder leases for at least this many, unless it waited GATHER_S."""
        self._running: dict[str, _Running] = {}
        self._stopping = threading.Event()
        self._drained = threading.Event()
        """Set once every held job finished: the heartbeat stops."""
        self._finished = queue.SimpleQueue[_Outcome | None]()
        """Finished jobs, for the settlers; read only with get() and get_nowait(), never
        a timed get: on CPython 3.11 that can block forever when several consumers race
        for an item (the timeout it recomputes goes negative, which means none), and a
        settler would then hold finished jobs until the next one finishes, past their
        leases."""
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="brook-task")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async_slots: asyncio.Semaphore | None = None
        self._threads: list[threading.Thread] = []
        self._visibility_ms: dict[str, int] = {}
        self._interrupts = 0

    # ------------------------------------------------------------ running

    def run(self, install_signals: bool = True) -> int:
        """Work until `stop()` (or SIGTERM/SIGINT); returns 0 once drained."""
        if install_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
            signal.signal(signal.SIGINT, lambda *_: self._interrupted())
        for task in self.tasks:
            bound = self.app.queue_of(task)
            self._visibility_ms[task.name] = int(bound.queue.settings()["visibility_timeout_ms"])
        self.app.sync_schedules([task.name for task in self.tasks])
        if any(task.is_async for task in self.tasks):
            self._loop = asyncio.new_event_loop()
            self._async_slots = asyncio.Semaphore(self.concurrency)
            self._start(self._loop.run_forever, "brook-async")
        settlers = [self._start(self._settle_loop, f"brook-settle-{n}") for n in range(self._lanes)]
        heartbeat = self._start(self._heartbeat_loop, "brook-heartbeat")
        feeders = [
            self._start(functools.partial(self._feed, task), f"brook-feed-{task.name}-{n}")
            for task in self.tasks
            for n in range(self._lanes)
        ]
        log.info(
            "worker started: %d tasks, concurrency %d",
            len(self.tasks),
            self.concurrency,
            extra={"tasks": [t.name for t in self.tasks], "pid": os.getpid()},
        )
        self._stopping.wait()
        for feeder in feeders:
            feeder.join()
        with self._slots:
            while self._running:
                self._slots.wait(0.1)
        self._drained.set()
        for _ in settlers:
            self._finished.put(None)  # one each
        for settler in settlers:
            settler.join()
        heartbeat.join()
        self._pool.shutdown(wait=True)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        log.info(
            "worker drained: %d jobs done, %d failed",
            self.stats.acked,
            self.stats.failed,
            extra={"pid": os.getpid()},
        )
        return 0

    def stop(self) -> None:
        """Drain: lease no more, finish and settle what is held, then `run` returns."""
        self._stopping.set()
        with self._slots:
            self._slots.notify_all()

    def _interrupted(self) -> None:
        self._interrupts += 1
        if self._interrupts > 1:
            log.warning("second interrupt: stopping now; held jobs run again elsewhere")
            os._exit(130)
        log.info("interrupt: draining (interrupt again to stop at once)")
        self.stop()

    def _start(self, target: Callable[[], None], name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)
        return thread

    # ------------------------------------------------------------ leasing

    def _feed(self, task: Task[Any, Any]) -> None:
        """Lease jobs of `task`. While the task is busy (its last lease found jobs),
        room for a batch is reserved before the lease and what it did not fill given
        back. A feeder whose last lease found nothing waits for one job with a room of
        its own, outside the reserved count: an idle task keeps no room from a busy one,
        and a busy one cannot keep an idle one from its next job."""
        bound = self.app.queue_of(task)
        failures = 0
        busy = False
        while not self._stopping.is_set():
            want, reserved = 1, busy
            if busy:
                with self._slots:
                    while self._free <= 0 and not self._stopping.is_set():
                        self._slots.wait()
                    # While jobs run, wait a moment for more slots to free up: one lease
                    # of many costs what one lease of one does.
                    deadline = time.monotonic() + GATHER_S
                    while self._free < self._batch_min and self._running:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0 or self._stopping.is_set():
                            break
                        self._slots.wait(remaining)
                    want = min(self._free, self._share)
                    if want <= 0 or self._stopping.is_set():
                        continue
                    self._free -= want
            jobs: list[Job] = []
            try:
                # Room reserved is held for one round trip only, never for a wait: a busy
                # feeder takes what is there now, and waits (for one) as an idle one.
                wait_s = 0.0 if reserved else self.poll_s
                jobs = bound.queue.lease(max_records=want, timeout=wait_s)
                failures = 0
            except BrookError as exc:
                failures += 1
                pause = min(5.0, 0.1 * 2**failures)
                log.warning("leasing %s failed (%s); again in %.1f s", task.name, exc, pause)
                self._stopping.wait(pause)
            finally:
                if reserved:
                    self._give_back(want - len(jobs))
            busy = bool(jobs)
            for job in jobs:  # held now: they run, even if a drain began meanwhile
                self._begin(task, job, reserved)

    def _give_back(self, slots: int) -> None:
        if slots > 0:
            with self._slots:
                self._free += slots
                self._slots.notify_all()

    def _begin(self, task: Task[Any, Any], job: Job, reserved: bool) -> None:
        running = _Running(task, job, reserved)
        with self._slots:
            self._running[job.receipt] = running
        if task.is_async:
            assert self._loop is not None
            asyncio.run_coroutine_threadsafe(self._run_async(running), self._loop)
        else:
            self._pool.submit(self._run_sync, running)

    # ------------------------------------------------------------ one job

    def _run_sync(self, running: _Running) -> None:
        running.started = time.monotonic()
        try:
            call = payload.decode_call(running.job.record.value)
        except ValueError as exc:
            self._finish(running, _Outcome(running.task, running.job, "discard", reason=str(exc)))
            return
        try:
            value = running.task.fn(*call.args, **call.kwargs)
        except BaseException as exc:
            self._finish(running, self._failed(running, exc))
            return
        self._finish(running, self._succeeded(running, value))

    async def _run_async(self, running: _Running) -> None:
        assert self._async_slots is not None
        async with self._async_slots:
            await self._run_async_now(running)

    async def _run_async_now(self, running: _Running) -> None:
        running.started = time.monotonic()
        try:
            call = payload.decode_call(running.job.record.value)
        except ValueError as exc:
            self._finish(running, _Outcome(running.task, running.job, "discard", reason=str(exc)))
            return
        timeout = running.task.timeout_ms
        try:
            coroutine = running.task.fn(*call.args, **call.kwargs)
            if timeout is None:
                value = await coroutine
            else:
                value = await asyncio.wait_for(coroutine, timeout / 1000)
        except TimeoutError:
            error = TimeoutError(f"ran longer than timeout_ms ({timeout})")
            self._finish(running, self._failed(running, error))
            return
        except BaseException as exc:
            self._finish(running, self._failed(running, exc))
            return
        self._finish(running, self._succeeded(running, value))

    def _succeeded(self, running: _Running, value: Any) -> _Outcome:
        if value is None:  # nothing to keep: app.job tells None for it all the same
            return _Outcome(running.task, running.job, "ack")
        result, why_not = payload.encode_result(value)
        if why_not:
            log.warning("task %s: %s", running.task.name, why_not)
        return _Outcome(running.task, running.job, "ack", result=result)

    def _failed(self, running: _Running, error: BaseException) -> _Outcome:
        task, job = running.task, running.job
        if isinstance(error, Retry):
            reason = error.reason or "Retry"
            return _Outcome(task, job, "nack", reason=reason, delay_ms=error.delay_ms)
        if isinstance(error, Discard):
            return _Outcome(task, job, "discard", reason=error.reason or "Discard")
        return _Outcome(task, job, "nack", reason=payload.error_summary(error))

    def _finish(self, running: _Running, outcome: _Outcome) -> None:
        outcome.ms = (time.monotonic() - (running.started or time.monotonic())) * 1000
        with self._slots:
            self._running.pop(running.job.receipt, None)
            if running.reserved:
                self._free += 1
            # Wake the feeders (any of them may take the slots) when it matters to them:
            # a first free slot, enough for a batch, or nothing left running.
            if self._free in (1, self._batch_min) or not self._running:
                self._slots.notify_all()
            if running.abandoned:
                return  # failed at its timeout already
        self._finished.put(outcome)

    # ------------------------------------------------------------ settling

    def _settle_loop(self) -> None:
        """Settle finished jobs in batches until a None (one per settler) says stop;
        by then every job has finished, so nothing is left behind."""
        finished = self._finished
        while True:
            first = finished.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + GATHER_S
            while len(batch) < SETTLE_BATCH_MAX:
                try:
                    more = finished.get_nowait()
                except queue.Empty:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(GATHER_POLL_S)
                    continue
                if more is None:
                    finished.put(None)  # another settler's, or this one's next turn
                    break
                batch.append(more)
            self._settle(batch)

    def _settle(self, batch: list[_Outcome]) -> None:
        acks: dict[str, list[_Outcome]] = {}
        for outcome in batch:
            if outcome.action == "ack":
                acks.setdefault(outcome.task.name, []).append(outcome)
            else:
                self._settle_one(outcome)
        for done in acks.values():
            queue_api = self.app.queue_of(done[0].task).queue
            jobs, results = [o.job for o in done], [o.result for o in done]
            self._call(functools.partial(queue_api.ack, jobs, results=results), done)
            self.stats.acked += len(done)
            for outcome in done:
                self._log(outcome)

    def _settle_one(self, outcome: _Outcome) -> None:
        queue_api = self.app.queue_of(outcome.task).queue
        if outcome.action == "nack":
            self._call(
                lambda: queue_api.nack(
                    outcome.job, delay_ms=outcome.delay_ms, reason=outcome.reason
                ),
                [outcome],
            )
        else:
            self._call(lambda: queue_api.discard(outcome.job, reason=outcome.reason), [outcome])
        self.stats.failed += 1
        self._log(outcome)

    def _call(self, settle: Callable[[], None], outcomes: list[_Outcome]) -> None:
        """Settle, trying again while the broker cannot be reached (a settle that
        landed before its answer was lost then reports the receipts stale)."""
        for attempt in range(8):
            try:
                settle()
                return
            except LeaseExpired as exc:
                self.stats.lost_leases += 1
                log.warning(
                    "%d jobs were settled after their leases ended; they may run again (%s)",
                    len(outcomes),
                    exc,
                )
                return
            except BrookError as exc:
                if exc.status < 500:
                    log.error("settling failed: %s", exc)
                    return
                log.warning("settling failed (%s); trying again", exc)
                time.sleep(min(2.0, 0.05 * 2**attempt))
        log.error("settling %d jobs failed: the broker could not be reached", len(outcomes))

    def _log(self, outcome: _Outcome) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        record = outcome.job.record
        ref = JobRef(outcome.task.topic, record.partition, record.offset)
        verb = {"ack": "done", "nack": "failed", "discard": "discarded"}[outcome.action]
        log.info(
            "%s %s %s in %.1f ms%s",
            outcome.task.name,
            ref,
            verb,
            outcome.ms,
            f": {outcome.reason.splitlines()[0]}" if outcome.reason else "",
            extra={
                "task": outcome.task.name,
                "job": str(ref),
                "attempt": outcome.job.attempt,
                "outcome": verb,
                "ms": round(outcome.ms, 1),
                **({"error": outcome.reason} if outcome.reason else {}),
            },
        )

    # ------------------------------------------------------------ leases kept

    def _heartbeat_loop(self) -> None:
        """Extend the leases of running jobs; fail sync jobs past their timeout."""
        shortest = min(self._visibility_ms.values())
        every = max(0.05, min(shortest / 3000, 10.0))
        while not self._drained.wait(every):
            now = time.monotonic()
            by_task: dict[str, list[_Running]] = {}
            overdue: list[_Running] = []
            with self._slots:
                for running in self._running.values():
                    if running.abandoned:
                        continue
                    limit, started = running.task.timeout_ms, running.started
                    if (
                        limit is not None
                        and started is not None
                        and not running.task.is_async
                        and (now - started) * 1000 > limit
                    ):
                        running.abandoned = True
                        overdue.append(running)
                    else:
                        by_task.setdefault(running.task.name, []).append(running)
            for running in overdue:
                error = TimeoutError(f"ran longer than timeout_ms ({running.task.timeout_ms})")
                outcome = self._failed(running, error)
                outcome.ms = (now - (running.started or now)) * 1000
                self._finished.put(outcome)
            for name, runs in by_task.items():
                queue_api = self.app.queue_of(runs[0].task).queue
                try:
                    queue_api.extend([r.job for r in runs], self._visibility_ms[name])
                except LeaseExpired as exc:
                    self.stats.lost_leases += 1
                    log.warning("a running job's lease ended before it was extended: %s", exc)
                except BrookError as exc:
                    log.warning("extending leases failed: %s", exc)
