"""Running a job: on this worker's threads, in a child process (isolation="process"),
or as a coroutine on its event loop; the job's context set for the run. Part of
`Worker` (tasks/worker.py)."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from brook.tasks import context, outcomes, payload
from brook.tasks.holding import Holding, monotonic_ms
from brook.tasks.isolation import Call as ChildCall
from brook.tasks.isolation import Child
from brook.tasks.ledger import Held, Outcome
from brook.tasks.refs import JobRef
from brook.tasks.task import Task

if TYPE_CHECKING:
    from brook.tasks.worker import Worker

log = logging.getLogger("brook.worker")


class RunningJobs:
    def _dispatch(self: Worker, starting: list[Held]) -> None:
        """Send jobs just started to where they run: async ones to the event loop, the
        others to the runner threads (a thread a slot: each starts at once). A task
        thread takes no lock: its end goes to the ends loop (a hundred threads
        contending for the ledger's lock would starve the feeders and settlers)."""
        timed = False
        for held in starting:
            holding = self._holding[held.leased.receipt]
            task = holding.task
            assert task is not None and holding.call is not None
            if held.leased.receipt in self._revoked:  # revoked before it started: not run
                self._ended.put((holding, Outcome("discard"), monotonic_ms()))
                continue
            timed = timed or held.deadline_ms is not None
            if task.is_async and task.isolation != "process":
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._start_async, holding, held.deadline_ms)
            else:
                self._runs.put((holding, held.deadline_ms))
                if self._idle_runners <= 0 and len(self._runners) < self.concurrency:
                    self._start_runner()
        if timed:
            self._deadlines_wake.set()

    def _context(self: Worker, holding: Holding, deadline_ms: float | None) -> context.CurrentJob:
        """What `brook.current_job()` tells the run of `holding`."""
        assert holding.task is not None
        record = holding.job.record
        return context.CurrentJob(
            ref=str(JobRef(holding.topic, record.partition, record.offset)),
            task=holding.task.name,
            attempt=holding.job.attempt,
            key_bytes=record.key,
            deadline=None
            if deadline_ms is None
            else time.time() + (deadline_ms - monotonic_ms()) / 1000,
        )

    def _start_runner(self: Worker) -> None:
        runner = threading.Thread(
            target=self._runner, name=f"brook-task-{len(self._runners)}", daemon=True
        )
        self._runners.append(runner)
        self._idle_runners += 1
        runner.start()

    def _runner(self: Worker) -> None:
        """A runner thread: runs sync and process jobs one at a time until a None."""
        while True:
            item = self._runs.get()
            if item is None:
                return
            self._idle_runners -= 1  # (counts are hints: a spare thread at worst)
            holding, deadline_ms = item
            try:
                outcome = self._run_here(holding, deadline_ms)
            except Exception as exc:  # the worker's own bug (a task's error is caught there)
                log.exception("running %s failed in the worker", holding.task)
                outcome = Outcome("nack", reason=payload.error_summary(exc))
            self._ended.put((holding, outcome, monotonic_ms()))
            self._idle_runners += 1

    def _run_here(self: Worker, holding: Holding, deadline_ms: float | None) -> Outcome:
        task, call = holding.task, holding.call
        assert task is not None and call is not None
        if task.isolation == "process":
            return self._run_in_child(holding)
        token = context.enter(functools.partial(self._context, holding, deadline_ms))
        try:
            if self._hooks.wanted("on_start", task.name):
                self._hooks.call("on_start", task.name, context.current_job())
            value = task.fn(*call.args, **call.kwargs)
        except BaseException as exc:
            return self._failed(exc)
        finally:
            context.leave(token)
        return self._succeeded(task, value)

    def _run_in_child(self: Worker, holding: Holding) -> Outcome:
        task = holding.task
        assert task is not None
        receipt = holding.job.receipt
        with self._lock:
            child = self._idle_children.pop() if self._idle_children else Child()
            self._children[receipt] = child

        def started() -> None:
            """The child has the function: the run's deadline counts from now."""
            with self._lock:
                deadline_ms = self.ledger.begin(receipt, monotonic_ms())
            if deadline_ms is not None:
                self._deadlines_wake.set()

        record = holding.job.record
        call = ChildCall(
            module=task.fn.__module__,
            qualname=task.fn.__qualname__,
            value=record.value,
            headers=record.headers,
            ref=str(JobRef(holding.topic, record.partition, record.offset)),
            task=task.name,
            attempt=holding.job.attempt,
            key=record.key,
            deadline=None if task.timeout_ms is None else time.time() + task.timeout_ms / 1000,
        )
        try:
            answer = child.run(call, started)
        finally:
            with self._lock:
                self._children.pop(receipt, None)
                self._idle_children.append(child)
        if answer is None:
            return Outcome("nack", reason="the task's child process died before it answered")
        if answer.note:
            log.warning("task %s: %s", task.name, answer.note)
        return Outcome(answer.action, answer.result, answer.reason, answer.delay_ms)

    def _start_async(self: Worker, holding: Holding, deadline_ms: float | None) -> None:
        """On the event loop: start the run as a task (kept, to be cancelled at the deadline)."""
        assert self._loop is not None
        run = self._loop.create_task(self._run_async(holding, deadline_ms))
        self._async_runs[holding.job.receipt] = run

    async def _run_async(self: Worker, holding: Holding, deadline_ms: float | None) -> None:
        task, call = holding.task, holding.call
        assert task is not None and call is not None
        token = context.enter(functools.partial(self._context, holding, deadline_ms))
        try:
            if self._hooks.wanted("on_start", task.name):
                await self._hooks.call_async("on_start", task.name, context.current_job())
            value = await task.fn(*call.args, **call.kwargs)
        except asyncio.CancelledError:
            # Cancelled at its deadline (the ledger has its attempt failed already).
            outcome = Outcome.timed_out(task.timeout_ms or 0)
        except BaseException as exc:
            outcome = self._failed(exc)
        else:
            outcome = self._succeeded(task, value)
        finally:
            context.leave(token)
            self._async_runs.pop(holding.job.receipt, None)
        self._ended.put((holding, outcome, monotonic_ms()))

    @staticmethod
    def _succeeded(task: Task[Any, Any], value: Any) -> Outcome:
        outcome, why_not = outcomes.of_return(value)
        if why_not:
            log.warning("task %s: %s", task.name, why_not)
        return outcome
