"""Workers say what they are and what they run: a record on `tasks-workers` every
limits.worker_announce_ms (task_topics.Announcement), keyed by the worker, on a
compacted topic, so the broker keeps each worker's newest. The dashboard's workers
page reads them (Flower's two views: the workers, and each task's running jobs); a
worker silent for three periods is shown gone, one that drained says so last.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable

from brook import limits, task_topics
from brook.api import BrokerApi
from brook.errors import BadRequest, BrookError, Conflict, Forbidden
from brook.task_topics import Announcement, Running

log = logging.getLogger("brook.worker")


Look = Callable[[], tuple[int, list[Running]]]
"""(slots busy, jobs running), read under the worker's lock."""


class Announcer:
    def __init__(
        self, broker: Callable[[], BrokerApi], tasks: list[str], slots: int, look: Look
    ) -> None:
        self.broker = broker
        """The app's broker, as it is now (an app closed and used again opens another)."""
        self.tasks = tasks
        self.slots = slots
        self.look = look
        self.started_ms = int(time.time() * 1000)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.worker = f"{self.host}:{self.pid}:{self.started_ms}"
        self._made = False
        self._forbidden = False

    def step(self) -> float:
        """Announce now; the seconds until the next time. A broker out of reach is
        expected (the other loops say so): the next period tries again. A key that may
        not write tasks-workers (limited to the tasks' topics) leaves the worker off the
        dashboard, said once, and never stops it."""
        try:
            self.announce()
        except Forbidden as exc:
            if not self._forbidden:
                log.warning(
                    "this worker is not shown on the dashboard: %s (give its key the topic %s)",
                    exc.message,
                    task_topics.WORKERS,
                )
            self._forbidden = True
            return limits.worker_announce_ms / 1000 * limits.worker_refused_skip_periods
        except BrookError as exc:
            if exc.status < 500:
                raise
        return limits.worker_announce_ms / 1000

    def announce(self, stopped: bool = False) -> None:
        busy, running = self.look()
        said = Announcement(
            worker=self.worker,
            host=self.host,
            pid=self.pid,
            tasks=self.tasks,
            slots=self.slots,
            busy=busy,
            started_ms=self.started_ms,
            at_ms=int(time.time() * 1000),
            running=running,
            stopped=stopped,
        )
        if not self._made:
            # Made by the first writer that may (an admin key); else the append makes it.
            with contextlib.suppress(Conflict, BadRequest, Forbidden):
                self.broker().create_topic(
                    task_topics.WORKERS,
                    compaction=True,
                    retention_ms=limits.revocation_retention_ms,
                )
            self._made = True
        self.broker().topic(task_topics.WORKERS).append(
            task_topics.encode_announcement(said), key=self.worker.encode()
        )

    def last_word(self) -> None:
        """Say it stopped (best effort: a worker going away must neither hang nor fail
        on it: the app may be closed already)."""
        try:
            self.announce(stopped=True)
        except Exception as exc:
            log.debug("the worker's last word was not said: %s", exc)
