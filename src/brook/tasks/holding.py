"""What the worker's parts share about a job it holds: the job as its shell knows it,
the stages of a run, a run's arguments in brief, the worker's clock."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from brook import limits
from brook.models import Job
from brook.tasks import payload
from brook.tasks.ledger import Stage
from brook.tasks.task import Task


@dataclass(slots=True)
class Holding:
    """A held job as the shell knows it: the lease, the call it carries, its task."""

    job: Job
    topic: str
    call: payload.Call | None
    task: Task[Any, Any] | None
    """The task this worker runs it with; None when it does not run it."""
    problem: str = ""
    """Why its record is not a task's call (when `call` is None)."""


def monotonic_ms() -> float:
    return time.monotonic() * 1000


RUNNING = (Stage.RUNNING, Stage.OVERDUE)


def excerpt(call: Any) -> str:
    """A run's arguments in brief, for the dashboard."""
    if call is None:
        return ""
    shown = ", ".join([repr(a) for a in call.args] + [f"{k}={v!r}" for k, v in call.kwargs.items()])
    chars = limits.args_excerpt_chars
    return shown if len(shown) <= chars else shown[: chars - 1] + "…"
