"""Settling what ran: acks, nacks and releases gathered into batches, sent, tried again
a bounded number of times, and logged; the hooks told. Part of `Worker` (tasks/worker.py)."""

from __future__ import annotations

import functools
import logging
import queue
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from brook import limits
from brook.errors import BrookError, LeaseExpired
from brook.tasks import outcomes
from brook.tasks.ledger import Settle
from brook.tasks.refs import JobRef

if TYPE_CHECKING:
    from brook.tasks.worker import Worker

log = logging.getLogger("brook.worker")


class SettlingJobs:
    def _settle_step(self: Worker) -> float:
        """Settle one batch of finished jobs (waits for the first); a None (one per
        settler, once drained) ends the loop."""
        first = self._finished.get()
        if first is None:
            return 0.0  # drained: _loops_stop is set, and the loop ends
        batch = [first]
        deadline = time.monotonic() + limits.worker_gather_s
        while len(batch) < limits.worker_settle_batch_max:
            try:
                more = self._finished.get_nowait()
            except queue.Empty:
                if time.monotonic() >= deadline or not self.ledger.unfinished:
                    break  # (nothing runs or waits: nothing more will finish soon)
                time.sleep(limits.worker_gather_poll_s)
                continue
            if more is None:
                self._finished.put(None)  # another settler's, or this one's next turn
                break
            batch.append(more)
        try:
            self._settle(batch)
        finally:
            with self._lock:
                self.ledger.settled(s.receipt for s in batch)
                for settle in batch:
                    self._holding.pop(settle.receipt, None)
                if not self.ledger.held:
                    self._lock.notify_all()  # (a drain waits for nothing held)
        return 0.0

    def _settle(self: Worker, batch: list[Settle]) -> None:
        acks: dict[str, list[Settle]] = {}
        for settle in batch:
            if settle.outcome.action == "ack":
                acks.setdefault(settle.topic, []).append(settle)
            else:
                self._settle_one(settle)
        for topic, done in acks.items():
            queue_api = self._queues[topic]
            jobs = [self._holding[s.receipt].job for s in done]
            results = [s.outcome.result for s in done]
            landed = self._call(functools.partial(queue_api.ack, jobs, results=results))
            if landed:
                self.stats.acked += len(done)
            else:
                self.stats.ack_failures += len(done)
            for settle in done:
                self._log(settle, landed)
                if landed:
                    self._after_settle(settle)

    def _settle_one(self: Worker, settle: Settle) -> None:
        queue_api = self._queues[settle.topic]
        job, outcome = self._holding[settle.receipt].job, settle.outcome
        action: Callable[[], None]
        if outcome.action == "nack":
            action = functools.partial(
                queue_api.nack, job, delay_ms=outcome.delay_ms, reason=outcome.reason
            )
        elif outcome.action == "release":
            action = functools.partial(
                queue_api.release, job, delay_ms=outcome.delay_ms, reason=outcome.reason
            )
        else:
            action = functools.partial(queue_api.discard, job, reason=outcome.reason)
        landed = self._call(action)
        if outcome.action != "release":
            self.stats.failed += 1
        self._log(settle, landed)
        if landed:
            self._after_settle(settle)

    def _after_settle(self: Worker, settle: Settle) -> None:
        """The outcome hooks of a settled job (tasks/hooks.py), in its context; its
        metrics."""
        point = self._outcome_point(settle)
        if self.metrics is not None and point is not None and settle.task is not None:
            outcome = {"on_success": "success", "on_retry": "retry"}.get(point, "dead")
            timed_out = settle.outcome.reason.startswith("TimeoutError")
            self.metrics.observe(settle.task, settle.ran_ms, outcome, timed_out)
        if point is None or not self._hooks.wanted(point, settle.task):
            return
        job = self._context(self._holding[settle.receipt], None)
        self._hooks.call_outcome(point, settle.task, job, settle.outcome)

    def _outcome_point(self: Worker, settle: Settle) -> str | None:
        if settle.task is None:
            return None
        attempt = self._holding[settle.receipt].job.attempt
        return outcomes.hook_point(settle.outcome, attempt, self._max_attempts.get(settle.topic, 1))

    def _call(self: Worker, settle: Callable[[], None]) -> bool:
        """Settle, trying again while the broker cannot be reached; whether it landed
        (a retry told the receipt is stale may follow a first try that landed before
        its answer was lost: that counts as not known to have landed)."""
        for attempt in range(limits.worker_settle_tries_max):
            try:
                settle()
                return True
            except LeaseExpired as exc:
                self.stats.lost_leases += 1
                log.warning("settled after its lease ended (%s)", exc)
                return False
            except BrookError as exc:
                if exc.status < 500:
                    log.error("settling failed: %s", exc)
                    return False
                log.warning("settling failed (%s); trying again", exc)
                time.sleep(min(2.0, 0.05 * 2**attempt))
        log.error("settling failed: the broker could not be reached")
        return False

    def _log(self: Worker, settle: Settle, landed: bool) -> None:
        outcome = settle.outcome
        if landed and not log.isEnabledFor(logging.INFO):
            return
        holding = self._holding[settle.receipt]
        record = holding.job.record
        ref = JobRef(settle.topic, record.partition, record.offset)
        name = settle.task or "(no task)"
        verb = {"ack": "done", "nack": "failed", "discard": "dead", "release": "released"}[
            outcome.action
        ]
        if not landed:
            verb = {
                "ack": "ran, but its ack failed: it will run again",
                "nack": "failed, and its nack failed: it runs again once its lease ends",
                "discard": "not run, and its discard failed",
                "release": "not run here, and its release failed",
            }[outcome.action]
        reason = outcome.reason.splitlines()[0] if outcome.reason else ""
        log.log(
            logging.INFO if landed else logging.WARNING,
            "%s %s %s in %.1f ms%s",
            name,
            ref,
            verb,
            settle.ran_ms,
            f": {reason}" if reason else "",
            extra={
                "task": name,
                "job": str(ref),
                "attempt": holding.job.attempt,
                "outcome": verb,
                "ms": round(settle.ran_ms, 1),
                **({"error": outcome.reason} if outcome.reason else {}),
            },
        )
