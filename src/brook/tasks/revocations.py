"""Revoking a job that is running (`app.revoke(ref, terminate=True)`): a record on the
topic `tasks-revoked` naming it, which every worker reads from where it started.

A waiting job is revoked in its queue group (a cancel: durable, at once). A running one
is leased by some worker that only its lease names; rather than a broker-side channel
to workers, the revocation is a record any worker tails, so it is as durable as any
append and needs nothing a worker does not have. The worker running the job stops it
(an async run cancelled, a process-isolated one's child killed; a thread cannot be
stopped: it runs to its end) and settles it dead with the reason, never to run again.
Workers look every limits.revocation_poll_ms.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from brook import limits, task_topics
from brook.errors import BadRequest, BrookError, Conflict, DataLoss, Forbidden, NotFound

if TYPE_CHECKING:
    from brook.api import BrokerApi

TOPIC = task_topics.REVOKED
"""Where revocations of running jobs go (no task topic is named so: theirs are
`tasks.<name>`)."""
POLL_S = limits.revocation_poll_ms / 1000

log = logging.getLogger("brook.worker")


def send(broker: BrokerApi, ref: str, reason: str) -> None:
    """Ask the workers to stop the run of job `ref` (durable when it returns)."""
    # Made by the first writer that may (an admin key); else the append makes it.
    with contextlib.suppress(Conflict, BadRequest, Forbidden):
        broker.create_topic(TOPIC, retention_ms=limits.revocation_retention_ms)
    broker.topic(TOPIC).append(ref.encode(), headers={task_topics.REASON_HEADER: reason.encode()})


class Reader:
    """One worker's place in the revocations: from the end as it was when it started
    (a revocation sent before names a run it does not have)."""

    def __init__(
        self, broker: Callable[[], BrokerApi], on_revoked: Callable[[str, str], None]
    ) -> None:
        self.broker = broker
        """The app's broker, as it is now."""
        self.on_revoked = on_revoked
        self.offset: int | None = None
        self.forbidden = False

    def step(self) -> float:
        """Read what came since the last step and tell each; the seconds to wait."""
        topic = self.broker().topic(TOPIC)
        try:
            if self.offset is None:
                self.offset = topic.end_offsets().get(0, 0)
                return POLL_S
            records = topic.read(0, self.offset, limits.revocations_read_records)
        except NotFound:  # none was ever sent
            self.offset = self.offset or 0
            return POLL_S
        except Forbidden as exc:  # a key limited to the tasks' topics: no terminate here
            if not self.forbidden:
                log.warning(
                    "revoke(terminate=True) cannot reach this worker: %s (give its key the "
                    "topic %s)",
                    exc.message,
                    TOPIC,
                )
            self.forbidden = True
            return POLL_S * 60
        except DataLoss:  # retention passed us: start again at the oldest kept
            self.offset = topic.start_offsets().get(0, 0)
            return 0.0
        except BrookError as exc:  # the broker out of reach: the other loops say so
            if exc.status < 500:
                raise
            return POLL_S
        for record in records:
            self.offset = record.offset + 1
            reason = (record.headers or {}).get(task_topics.REASON_HEADER, b"revoked")
            self.on_revoked(record.value.decode(errors="replace"), reason.decode(errors="replace"))
        return 0.0 if len(records) == limits.revocations_read_records else POLL_S
