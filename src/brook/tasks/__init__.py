"""Tasks: plain Python functions as jobs on Brook's queues (docs/TASKS.md).

`App` registers tasks and enqueues their jobs; `Worker` (or `brook worker`) runs them.
"""

from __future__ import annotations

from brook.tasks.app import App
from brook.tasks.canvas import Chain, Chord, Group, GroupRef, Signature, chain, chord, group
from brook.tasks.context import CurrentJob, JobContext, current_job
from brook.tasks.refs import Discard, JobRef, JobStatus, Retry
from brook.tasks.results import TaskFailed
from brook.tasks.task import Task

__all__ = [
    "App",
    "Chain",
    "Chord",
    "CurrentJob",
    "Discard",
    "Group",
    "GroupRef",
    "JobContext",
    "JobRef",
    "JobStatus",
    "Retry",
    "Signature",
    "Task",
    "TaskFailed",
    "chain",
    "chord",
    "current_job",
    "group",
]
