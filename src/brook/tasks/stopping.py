"""Stopping runs: a run past its deadline (timeout_ms) or revoked with terminate=True is
ended (a child killed, a coroutine cancelled, a thread let run to its end) and settled;
and what runs now, for the announcements. Part of `Worker` (tasks/worker.py)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from brook import limits
from brook.task_topics import Running
from brook.tasks.holding import RUNNING, excerpt, monotonic_ms
from brook.tasks.ledger import Held
from brook.tasks.refs import JobRef

if TYPE_CHECKING:
    from brook.tasks.worker import Worker

log = logging.getLogger("brook.worker")


class StoppingJobs:
    def _deadlines_step(self: Worker) -> float:
        """Fail the runs past their deadline now; the seconds until the next one."""
        now = monotonic_ms()
        with self._lock:
            overdue = self.ledger.overdue(now)
            following = self.ledger.next_deadline_ms()
        for held in overdue:
            self._stop_run(held, now)
        return (
            limits.worker_idle_wake_s
            if following is None
            else max(0.0, (following - monotonic_ms()) / 1000)
        )

    def _stop_run(self: Worker, held: Held, now_ms: float) -> None:
        receipt = held.leased.receipt
        holding = self._holding[receipt]
        assert holding.task is not None
        task = holding.task
        ran_ms = now_ms - (held.started_ms or now_ms)
        if task.isolation == "process":
            child = self._children.get(receipt)
            if child is not None:
                child.kill()
            how = "its process killed"
        elif task.is_async:
            run = self._async_runs.get(receipt)
            if run is not None and self._loop is not None:
                self._loop.call_soon_threadsafe(run.cancel)
            how = "cancelled"
        else:
            how = (
                "its thread cannot be stopped: the job keeps its slot, lease and key "
                'until it returns (isolation="process" kills at the deadline)'
            )
        log.warning(
            "%s %s timed out after %.0f ms (timeout_ms %s): %s",
            task.name,
            self._ref(held),
            ran_ms,
            task.timeout_ms,
            how,
            extra={"task": task.name, "job": str(self._ref(held)), "outcome": "timed out"},
        )

    def _in_flight(self: Worker) -> tuple[int, dict[str, int]]:
        """(slots busy, jobs running per task), for the metrics."""
        with self._lock:
            running: dict[str, int] = {}
            for held in self.ledger.held.values():
                if held.started_ms is not None and held.stage in RUNNING:
                    task = held.leased.task or ""
                    running[task] = running.get(task, 0) + 1
            return self.ledger.busy, running

    def _running(self: Worker) -> tuple[int, list[Running]]:
        """(slots busy, the jobs running), for the announcements."""
        now_ms, wall_ms = monotonic_ms(), time.time() * 1000
        found: list[Running] = []
        with self._lock:
            for receipt, held in self.ledger.held.items():
                holding = self._holding.get(receipt)
                if held.started_ms is None or held.stage not in RUNNING or holding is None:
                    continue
                call = holding.call
                record = holding.job.record
                found.append(
                    Running(
                        ref=str(JobRef(holding.topic, record.partition, record.offset)),
                        task=held.leased.task or "",
                        attempt=holding.job.attempt,
                        started_ms=int(wall_ms - (now_ms - held.started_ms)),
                        args=excerpt(call),
                    )
                )
            return self.ledger.busy, found

    def _revoked_run(self: Worker, ref: str, reason: str) -> None:
        """A revocation read (tasks/revocations.py): stop the run of job `ref` if it is
        running here, and settle it dead with `reason` when it ends."""
        with self._lock:
            found = [
                (receipt, holding)
                for receipt, holding in self._holding.items()
                if str(
                    JobRef(holding.topic, holding.job.record.partition, holding.job.record.offset)
                )
                == ref
            ]
            for receipt, _ in found:
                self._revoked[receipt] = reason
        for receipt, holding in found:
            task = holding.task
            if task is None:
                continue
            if task.isolation == "process":
                child = self._children.get(receipt)
                if child is not None:
                    child.kill()
            elif task.is_async:
                run = self._async_runs.get(receipt)
                if run is not None and self._loop is not None:
                    self._loop.call_soon_threadsafe(run.cancel)
            else:
                log.warning(
                    "%s %s revoked while running: a thread cannot be stopped; it runs to "
                    'its end and is then settled dead (isolation="process" or an async '
                    "task stops at once)",
                    task.name,
                    ref,
                )
            log.info("%s %s revoked: %s", task.name, ref, reason)

    def _ref(self: Worker, held: Held) -> JobRef:
        record = self._holding[held.leased.receipt].job.record
        return JobRef(held.leased.topic, record.partition, record.offset)
