"""`brook.current_job()`: the job a task is running for, seen from inside the task.

Set by the worker around each run (a context variable: each thread and each async
task sees its own), so a task can tie its log lines to its job (`JobContext`, a
logging filter, does it for every line), know its attempt, and look at its deadline
to stop in time (the soft limit of a sync task, which the worker cannot interrupt).
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class CurrentJob:
    """The job being run: its reference (`topic/partition/offset`), task, attempt
    (1 on the first run), key (as text, as `options(key=...)` takes it; `key_bytes` as
    stored; None without one), and deadline (epoch seconds; None without timeout_ms)."""

    ref: str
    task: str
    attempt: int
    key_bytes: bytes | None
    deadline: float | None

    @property
    def key(self) -> str | None:
        """The job's key as text (invalid UTF-8 replaced); None without one."""
        return None if self.key_bytes is None else self.key_bytes.decode("utf-8", "replace")

    def time_left(self) -> float | None:
        """Seconds until the deadline (negative past it); None when the task has no
        timeout_ms (check for None before comparing)."""
        return None if self.deadline is None else self.deadline - time.time()


_current: contextvars.ContextVar[Callable[[], CurrentJob] | CurrentJob | None] = (
    contextvars.ContextVar("brook_current_job", default=None)
)
"""The job, or how to make it: a worker sets a maker (most tasks never ask, and a
CurrentJob per job costs the worker's hot path)."""


def current_job() -> CurrentJob:
    """The job this task runs for. Raises RuntimeError outside a job run by a worker
    (calling a task as a plain function runs no job)."""
    job = _current.get()
    if job is None:
        raise RuntimeError(
            "no job is running here: brook.current_job() works inside a task a worker runs"
        )
    return job if isinstance(job, CurrentJob) else job()


class JobContext(logging.Filter):
    """A logging filter that adds the current job to every record logged while a
    worker runs it: `record.job` (its reference, `topic/partition/offset`),
    `record.attempt` and `record.task`. Outside a job it sets them to `missing`
    (default "-", so a format such as `"%(job)s %(message)s"` never fails), or leaves
    the record alone when `missing` is None. It never drops a record.

        handler.addFilter(brook.tasks.JobContext())

    `brook worker` adds one to the handler it logs with (your tasks' lines included,
    when you configure no logging of your own: see docs/TASKS.md)."""

    def __init__(self, missing: str | None = "-") -> None:
        super().__init__()
        self.missing = missing

    def filter(self, record: logging.LogRecord) -> bool:
        job = _current.get()
        if job is not None:
            current = job if isinstance(job, CurrentJob) else job()
            record.job, record.attempt, record.task = current.ref, current.attempt, current.task
        elif self.missing is not None:
            record.job = record.attempt = record.task = self.missing
        return True


_Token = contextvars.Token[Callable[[], CurrentJob] | CurrentJob | None]


def enter(job: CurrentJob | Callable[[], CurrentJob]) -> _Token:
    """Make `job` (or what makes it when asked) the current one (the worker, around a
    run); `leave` with the token."""
    return _current.set(job)


def leave(token: _Token) -> None:
    _current.reset(token)
