"""The dashboard's workers page: Flower's two views, from what workers announce
(brook/task_topics.py, `tasks-workers`): each task worker (host, pid, tasks, slots
busy, started, last seen; alive, gone or stopped) and the jobs running now, by task
(ref, worker, attempt, running for, arguments); and revoking a job by its reference.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from brook import limits, task_topics
from brook.broker import Broker
from brook.errors import BadRequest, NotFound
from brook.task_topics import Announcement, Running

TASKS_GROUP = "tasks"


@dataclass
class RunningRow:
    job: Running
    worker: str
    running_s: float


@dataclass
class WorkersPage:
    workers: list[tuple[Announcement, str]] = field(default_factory=list)
    """Each worker's newest announcement, and whether it is alive, gone or stopped."""
    running: dict[str, list[RunningRow]] = field(default_factory=dict)
    """The jobs running on alive workers, by task."""


def workers(broker: Broker) -> WorkersPage:
    """The workers' newest announcements (at most worker_announcements_shown_max)."""
    page = WorkersPage()
    if task_topics.WORKERS not in {t.name for t in broker.topics()}:
        return page
    topic = broker.topic(task_topics.WORKERS)
    newest: dict[str, Announcement] = {}
    starts = topic.start_offsets()
    for partition, end in topic.end_offsets().items():
        offset = max(starts.get(partition, 0), end - limits.dashboard_announcements_read_back)
        while offset < end:
            records = topic.read(partition, offset, limits.read_records_max)
            if not records:
                break
            for record in records:
                said = task_topics.decode_announcement(record.value)
                if said is not None:
                    known = newest.get(said.worker)
                    if known is None or known.at_ms <= said.at_ms:
                        newest[said.worker] = said
            offset = records[-1].offset + 1
    now_ms = time.time() * 1000
    silent_ms = 3 * limits.worker_announce_ms
    ordered = sorted(newest.values(), key=lambda a: (-a.at_ms, a.worker))
    for said in ordered[: limits.worker_announcements_shown_max]:
        state = (
            "stopped" if said.stopped else "gone" if now_ms - said.at_ms > silent_ms else "alive"
        )
        page.workers.append((said, state))
        if state != "alive":
            continue
        for job in said.running:
            row = RunningRow(job, said.worker, max(0.0, (now_ms - job.started_ms) / 1000))
            page.running.setdefault(job.task, []).append(row)
    for rows in page.running.values():
        rows.sort(key=lambda r: -r.running_s)
    page.workers.sort(key=lambda w: ({"alive": 0, "stopped": 1, "gone": 2}[w[1]], w[0].worker))
    return page


def revoke(broker: Broker, ref: str, terminate: bool, reason: str) -> str:
    """Revoke task job `ref` (topic/partition/offset) as `app.revoke` does: cancelled if
    waiting; if running and `terminate`, a revocation its worker acts on. What was done."""
    topic, _, rest = ref.partition("/")
    partition, _, offset = rest.partition("/")
    if not (topic and partition.isdigit() and offset.isdigit()):
        raise BadRequest(f"{ref!r} is not a job reference (topic/partition/offset)")
    queue = broker.find_queue(topic, TASKS_GROUP)
    if queue is None:
        raise NotFound(f"no task queue on topic {topic!r}")
    position = (int(partition), int(offset))
    if queue.cancel([position], reason=reason):
        return "revoked: it will not run"
    state = queue.job(*position).state
    if state == "leased" and terminate:
        broker.topic(task_topics.REVOKED).append(
            ref.encode(), headers={task_topics.REASON_HEADER: reason.encode()}
        )
        return "running: its worker stops it"
    return f"not revoked: it is {state}"
