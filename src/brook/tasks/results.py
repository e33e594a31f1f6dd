"""Waiting for a job's result (`app.result`): by long-poll on the broker, one request
answered when the job is finished (its ack or death durable), never a loop of looks.

A job acked returns what it returned (decoded JSON; None when the task returned
nothing, or when the result was not kept: larger than 64 KiB, not JSON, or older than
the group keeps results). A job dead raises `TaskFailed` with its error.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from brook import limits
from brook.errors import NotFound
from brook.tasks import payload

if TYPE_CHECKING:
    from brook.api import QueueApi
    from brook.models import JoinInfo
    from brook.tasks.refs import JobRef

GROUP = "tasks"


class TaskFailed(Exception):
    """The job ended dead: `ref` names it, `error` is why (its last attempt's error,
    as `app.job(ref).error` gives it). For a job a canvas had not enqueued yet (a
    chain's link, a chord's callback) that never ran because a job before it died,
    `failed` names that job (else it is `str(ref)`)."""

    def __init__(self, ref: JobRef | str, error: str, failed: str = "") -> None:
        failed = failed or str(ref)
        where = "" if failed == str(ref) else f" (job {failed} before it failed)"
        super().__init__(f"job {ref} failed: {error}{where}")
        self.ref = ref
        self.error = error
        self.failed = failed


def outcome(ref: JobRef, state: str, error: str, result: bytes | None) -> Any:
    """What `app.result` gives for a finished job: its result, or TaskFailed raised."""
    if state == "dead":
        raise TaskFailed(ref, error or "dead")
    if state == "unknown":
        raise NotFound(f"no job {ref}: its topic has no record there (or retention removed it)")
    return payload.decode_result(result)


def next_wait_s(
    ref: JobRef, deadline: float | None, timeout: float | None, state: str, looked: bool
) -> float:
    """How long the next long-poll may wait: the broker's cap, or what is left before
    `deadline` (time.monotonic()), 0 for a first look; raises TimeoutError when
    nothing is left after a look."""
    remaining = limits.wait_ms_max / 1000
    if deadline is not None:
        remaining = max(0.0, min(remaining, deadline - time.monotonic()))
        if remaining <= 0 and looked:
            raise TimeoutError(f"job {ref} did not finish within {timeout:g} s (it is {state})")
    return remaining


def placed(ref: JobRef, info: JoinInfo) -> JobRef | None:
    """The job a join's reference names, once its join appended it; None while the
    join waits. Raises TaskFailed when the join failed (a job before it died)."""
    from brook.tasks.refs import JobRef

    if info.state == "failed":
        raise TaskFailed(ref, info.error, info.failed_ref)
    if info.state == "fired" and info.partition is not None and info.offset is not None:
        return JobRef(ref.topic, info.partition, info.offset)
    return None


def wait_placed(join_of: Any, ref: JobRef, deadline: float | None, timeout: float | None) -> JobRef:
    """The job a join's reference names, waiting by long-poll on the join until it
    is appended (TaskFailed if it never will be, TimeoutError)."""
    assert ref.join is not None
    looked = False
    while True:
        remaining = next_wait_s(ref, deadline, timeout, WAITING, looked)
        looked = True
        found = placed(ref, join_of(ref.join, remaining))
        if found is not None:
            return found


WAITING = "waiting"
"""The state of a job a join has not enqueued yet (the jobs before it run)."""


def wait(
    queue_of: Any,
    ref: JobRef,
    timeout: float | None,
    exists: Any,
    join_of: Any = None,
) -> Any:
    """The result of job `ref` once finished, waiting up to `timeout` seconds (None:
    as long as it takes). `queue_of(topic)` opens the task group (raising NotFound
    while no worker claimed it); `exists(ref)` tells whether the job's record is there.
    Raises TaskFailed (dead), NotFound (no such job), TimeoutError (not finished in time)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    if ref.join is not None:
        ref = wait_placed(join_of, ref, deadline, timeout)
    queue: QueueApi | None = None
    state = "pending"
    looked = False
    while True:
        remaining = next_wait_s(ref, deadline, timeout, state, looked)
        looked = True
        if queue is None:
            try:
                queue = queue_of(ref.topic)
            except NotFound:
                if not exists(ref):
                    raise NotFound(f"no job {ref}: its topic has no record there") from None
                time.sleep(min(remaining, limits.result_unclaimed_pause_s))
                continue
        info = queue.job(ref.partition, ref.offset, timeout=remaining)
        state = info.state
        if state in ("acked", "dead", "unknown"):
            return outcome(ref, state, info.error, info.result)
