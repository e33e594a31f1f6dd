"""The topics the task layer keeps beside the tasks' own, and their records' shapes:
shared by the workers that write them (brook/tasks) and the dashboard that reads them
(brook/server/ui), which imports nothing of the task layer. Pure: no I/O.

    tasks-revoked   a record per revocation of a running job: value the job's reference
                    (topic/partition/offset), header brook.reason
    tasks-workers   a record per worker every worker_announce_ms: key the worker's id,
                    value a Announcement (JSON); compacted, so its newest per worker stays
"""

from __future__ import annotations

import msgspec

REVOKED = "tasks-revoked"
WORKERS = "tasks-workers"
REASON_HEADER = "brook.reason"


class Running(msgspec.Struct, frozen=True, kw_only=True):
    """A job a worker is running."""

    ref: str
    task: str
    attempt: int
    started_ms: int
    args: str
    """The call's arguments, cut to args_excerpt_chars."""


class Announcement(msgspec.Struct, frozen=True, kw_only=True):
    """What a worker says of itself."""

    worker: str
    """host:pid:start, unique per worker process."""
    host: str
    pid: int
    tasks: list[str]
    slots: int
    busy: int
    started_ms: int
    at_ms: int
    running: list[Running] = []
    stopped: bool = False
    """Its last word: it drained and exited."""


encode_announcement = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Announcement).decode


def decode_announcement(raw: bytes) -> Announcement | None:
    """The announcement a record holds, or None for one that is not."""
    try:
        return _decode(raw)
    except msgspec.DecodeError:
        return None
