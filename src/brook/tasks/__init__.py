"""Tasks: plain Python functions as jobs on Brook's queues (docs/TASKS.md).

`App` registers tasks and enqueues their jobs; `Worker` (or `brook worker`) runs them.
"""

from __future__ import annotations

from brook.tasks.app import App, Discard, JobRef, JobStatus, Retry, Task
from brook.tasks.context import CurrentJob, JobContext, current_job
from brook.tasks.results import TaskFailed

__all__ = [
    "App",
    "CurrentJob",
    "Discard",
    "JobContext",
    "JobRef",
    "JobStatus",
    "Retry",
    "Task",
    "TaskFailed",
    "current_job",
]
