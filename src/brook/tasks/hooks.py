"""Hooks: functions an app asks its workers to call at points of a job's life (Celery's
signals `task_prerun`, `task_success`, `task_failure`, `task_retry` and
`worker_process_init`), app-wide or for one task.

- `on_start(job)`: in the run's own thread or event loop, just before the function.
- `on_success(job, result)`: once the job's ack is durable (`result` as `app.result`
  gives it: decoded JSON, None when not kept).
- `on_retry(job, error)`: once a failed attempt's nack is durable and another attempt
  will follow (`error` is the text `app.job(ref).error` shows).
- `on_failure(job, error)`: once the job is dead: its last allowed attempt failed (by
  the worker's count of the queue's max_attempts), it timed out on its last attempt,
  or it raised `brook.Discard`.
- `on_worker_start()`: once in each worker process before it leases (and in each child
  process of `isolation="process"` tasks, before its first job): open pools here.

`job` is the `brook.CurrentJob` of the run, and `brook.current_job()` tells it too
inside a hook. A hook that raises is logged with its traceback and changes nothing:
the job's outcome is the function's. A hook may be a coroutine function (awaited on
the worker's event loop for an `async def` task's `on_start`, else run to completion).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from brook.tasks import context, payload

if TYPE_CHECKING:
    from brook.tasks.context import CurrentJob
    from brook.tasks.ledger import Outcome

log = logging.getLogger("brook.worker")

POINTS = ("on_start", "on_success", "on_retry", "on_failure", "on_worker_start")


class Hooks:
    """The hooks of one app: app-wide, and per task name."""

    def __init__(self) -> None:
        self._app: dict[str, list[Callable[..., Any]]] = {point: [] for point in POINTS}
        self._tasks: dict[str, dict[str, list[Callable[..., Any]]]] = {}

    def add(self, point: str, fn: Callable[..., Any], task: str | None = None) -> None:
        """Call `fn` at `point` for every task's jobs, or for `task`'s only."""
        if point not in POINTS:
            raise ValueError(f"no hook point {point!r}: there are {', '.join(POINTS)}")
        if not callable(fn):
            raise TypeError(f"a hook is a function, not {type(fn).__name__}")
        if task is None:
            self._app[point].append(fn)
        else:
            if point == "on_worker_start":
                raise ValueError("on_worker_start is per process, not per task")
            self._tasks.setdefault(task, {p: [] for p in POINTS})[point].append(fn)

    def of(self, point: str, task: str | None) -> list[Callable[..., Any]]:
        """The hooks to call at `point` for a job of `task`: app-wide ones first."""
        found = self._app[point]
        per_task = self._tasks.get(task or "")
        return [*found, *per_task[point]] if per_task else found

    def wanted(self, point: str, task: str | None) -> bool:
        return bool(self._app[point]) or bool(self._tasks.get(task or "", {}).get(point))

    def call(self, point: str, task: str | None, *args: Any) -> None:
        """Call the hooks of `point` for `task` with `args`, each on its own: one that
        raises is logged, and the others still run."""
        for fn in self.of(point, task):
            try:
                value = fn(*args)
                if inspect.iscoroutine(value):
                    asyncio.run(value)
            except Exception:
                log.exception("hook %s %s failed (the job's outcome stands)", point, _name(fn))

    async def call_async(self, point: str, task: str | None, *args: Any) -> None:
        """`call`, on an event loop: a coroutine hook is awaited there."""
        for fn in self.of(point, task):
            try:
                value = fn(*args)
                if inspect.iscoroutine(value):
                    await value
            except Exception:
                log.exception("hook %s %s failed (the job's outcome stands)", point, _name(fn))

    def call_outcome(self, point: str, task: str | None, job: CurrentJob, outcome: Outcome) -> None:
        """The outcome hook `point` of a settled run, in the job's context:
        `on_success` with the result as `app.result` gives it, the others with the
        error (the worker and `app.testing()` both call them so)."""
        token = context.enter(job)
        try:
            if point == "on_success":
                self.call(point, task, job, payload.decode_result(outcome.result))
            else:
                self.call(point, task, job, outcome.reason)
        finally:
            context.leave(token)


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
