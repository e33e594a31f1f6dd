"""`app.testing()`: an app's tasks run in the test's own thread, on a fresh in-memory
broker whose clock the test moves, so a unit test enqueues, drains and asserts in
milliseconds, with no server and no worker process (Celery's eager mode, but through
the real broker: the jobs' records, queue group, retries with their backoff, delays,
dead letters and results are Brook's own, not a simulation of them).

    with app.testing() as t:
        ref = charge.enqueue("o-1", amount=100)
        t.drain()                       # runs every job due, fast-forwarding delays
        assert app.result(ref) == {...}

What differs from a worker: runs are one at a time, in the calling thread, in offset
order per queue; `timeout_ms` is not enforced (nothing runs beside the run to stop
it); periodic tasks do not fire by themselves (enqueue them, or call the function).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import TYPE_CHECKING, Any, cast

from brook import limits
from brook.clock import Clock
from brook.tasks import context, outcomes, payload
from brook.tasks.refs import JobRef

if TYPE_CHECKING:
    from brook.api import QueueApi
    from brook.broker import Broker
    from brook.models import Job
    from brook.queue.handle import Queue
    from brook.tasks.app import App
    from brook.tasks.ledger import Outcome


class ManualClock:
    """Wall time that moves only when told (from the real time at the start)."""

    def __init__(self) -> None:
        self._now = time.time()
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        if not seconds >= 0:
            raise ValueError(f"the clock moves forward only, not by {seconds!r} s")
        with self._lock:
            self._now += seconds


class Testing:
    """The app in testing mode (`app.testing()`); restores the app when left."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.clock = ManualClock()
        self._saved: tuple[Any, ...] | None = None

    def __enter__(self) -> Testing:
        import brook

        app = self.app
        broker = brook.open("memory://", clock=Clock(wall=self.clock.time))
        with app._mutex:
            self._saved = (app.location, app._broker, dict(app._topics), dict(app._queues))
            app.location, app._broker = "memory://", broker
            app._topics.clear()
            app._queues.clear()
            app._claimed.clear()
        return self

    def __exit__(self, *exc: object) -> None:
        app = self.app
        assert self._saved is not None
        with app._mutex:
            broker = app._broker
            app.location, app._broker, topics, queues = self._saved
            app._topics.clear()
            app._topics.update(topics)
            app._queues.clear()
            app._queues.update(queues)
            app._claimed.clear()
        if broker is not None:
            broker.close()

    def advance(self, seconds: float) -> None:
        """Move the broker's clock `seconds` forward (delays and backoffs come due)."""
        self.clock.advance(seconds)

    def drain(self, max_jobs: int = 100_000) -> int:
        """Run every job that is due, and those that fall due as the clock is moved
        to the next due one (a delay, a retry's backoff), until no job is left to run
        (acked or dead, or pending on a queue of a task this app does not declare);
        the number of runs. Raises RuntimeError past `max_jobs` runs (a job that
        enqueues itself for ever)."""
        queues = {
            topic: cast("Queue", self.app.claim_queue(topic)[0])  # embedded: memory://
            for topic in sorted({task.topic for task in self.app.tasks.values()})
        }
        ran = 0
        looked_at_joins = False
        while True:
            leased = False
            for topic, queue in queues.items():
                for job in queue.lease(max_records=limits.testing_lease_records, timeout=0):
                    if ran >= max_jobs:
                        raise RuntimeError(f"drain ran {max_jobs} jobs and more are due")
                    self._run(topic, queue, job)
                    ran += 1
                    leased = True
            if leased:
                looked_at_joins = False
                continue
            waiting = [q for q in queues.values() if _waiting(q)]
            due = [d for q in waiting if (d := q.next_due_ms()) is not None]
            if not due:
                if looked_at_joins:
                    return ran
                # A canvas's next jobs are appended by the broker's joins, on their
                # own thread: let them move, then look for jobs once more.
                self._broker().joins_idle(timeout=limits.testing_joins_idle_s)
                looked_at_joins = True
                continue
            wait_ms = min(due) - int(self.clock.time() * 1000)
            self.clock.advance(max(wait_ms, 0) / 1000 + 0.001)

    def _broker(self) -> Broker:
        broker = self.app._broker  # brook.open("memory://"): a Broker (__enter__)
        assert broker is not None
        return cast("Broker", broker)

    def _run(self, topic: str, queue: QueueApi, job: Job) -> None:
        """One run as a worker does it: the function, the settle, the hooks."""
        record = job.record
        ref = JobRef(topic, record.partition, record.offset)
        try:
            call = payload.decode_job(record.value, record.headers)
        except ValueError as exc:
            queue.discard(job, reason=str(exc))
            return
        task = self.app.tasks.get(call.task)
        if task is None:
            known = ", ".join(sorted(self.app.tasks))
            queue.discard(job, reason=f"no task named {call.task} (the app has: {known})")
            return
        current = context.CurrentJob(str(ref), task.name, job.attempt, record.key, None)
        hooks = self.app.hooks
        token = context.enter(current)
        try:
            hooks.call("on_start", task.name, current)
            value = task.fn(*call.args, **call.kwargs)
            if inspect.iscoroutine(value):
                value = asyncio.run(value)
        except BaseException as error:  # the task's failure is its attempt's
            outcome = outcomes.of_error(error)
        else:
            outcome, _ = outcomes.of_return(value)
        finally:
            context.leave(token)
        self._settle(queue, job, outcome)
        point = outcomes.hook_point(outcome, job.attempt, queue.settings()["max_attempts"])
        if point is not None:
            hooks.call_outcome(point, task.name, current, outcome)

    @staticmethod
    def _settle(queue: QueueApi, job: Job, outcome: Outcome) -> None:
        if outcome.action == "ack":
            queue.ack(job, results=[outcome.result])
        elif outcome.action == "nack":
            queue.nack(job, delay_ms=outcome.delay_ms, reason=outcome.reason)
        else:
            queue.discard(job, reason=outcome.reason)


def _waiting(queue: QueueApi) -> bool:
    """Whether the group holds jobs still to run."""
    stats = queue.stats()
    return any(stats.get(state) for state in ("ready", "delayed", "retrying", "leased"))
