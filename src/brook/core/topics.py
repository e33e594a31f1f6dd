"""A topic as the core holds it (`TopicState`: its config and partition logs, opened
on first use), and the hooks the broker's services give the core (`Hooks`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

from brook.errors import (
    Closed,
    PartitionNotFound,
    TopicNotFound,
)
from brook.log.partition import PartitionLog
from brook.partitioner import RoundRobin
from brook.ranges import Ranges
from brook.records import TopicConfig, TopicInfo

Needed = Callable[[int, int], Ranges]
"""For retention: the offsets from `base` to before `next_offset` still needed."""
RetentionHold = Callable[[str, int], Needed | None]
"""A service's say in retention: for (topic, partition), what it still needs."""


@dataclass(frozen=True, eq=False)
class Hooks:
    """What a service asks the core to tell it (`Core.register`); each is optional.

    The core calls them on its own threads: `on_round` on the syncer's after every
    commit round (with the topics it wrote to; all of them at close), the others with
    the writer role. None may wait for the committer, and `on_round` must be quick.
    """

    name: str
    """Names the service in logs and as its maintenance task."""
    on_round: Callable[[frozenset[str]], None] | None = None
    on_topic_created: Callable[[str], None] | None = None
    """Once a topic exists."""
    on_topic_deleted: Callable[[str], None] | None = None
    """Once a topic's records are gone: forget what the service kept for it."""
    on_group_deleted: Callable[[str, str], None] | None = None
    """Once a queue group (topic, group) and its status log are gone."""
    maintain: Callable[[], None] | None = None
    """Run at every maintenance, supervised as its own task."""
    retention_hold: RetentionHold | None = None
    status_log_hold: Callable[[str, str], int | None] | None = None
    """For a queue group (topic, group): the status-log offset below which the
    service no longer needs its entries (None: it needs none)."""


class TopicState:
    """A topic's settings and its partition logs, opened when first wanted.

    A broker that opens storage reads every topic's config, but not its logs: those are
    opened by the first call that needs them (or soon after start, in the background),
    so a take-over serves within the time of a config read per topic, not of opening
    every log (on S3, a dozen requests a topic; docs/ARCHITECTURE.md, "Recovery")."""

    def __init__(
        self,
        name: str,
        config: TopicConfig,
        logs: list[PartitionLog] | None = None,
        opener: Callable[[TopicState], list[PartitionLog]] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self._logs = logs
        self._opener = opener
        """Opens the logs of a topic stored before this broker started (a topic made
        here is given its logs, and has none)."""
        self._opening = threading.Lock()
        self._ended: str | None = None
        """Why the logs can no longer be opened (the topic deleted, the broker closed)."""
        self.spread = RoundRobin()
        """Picks the partition of records without a key."""

    @property
    def logs(self) -> list[PartitionLog]:
        """The partition logs, opened now if they are not yet (by the first caller; the
        others wait for it). Raises what opening raises (StorageError, CorruptData: the
        next call tries again), TopicNotFound once deleted, Closed once closed."""
        logs = self._logs
        if logs is not None:
            return logs
        with self._opening:
            if self._logs is None:
                if self._ended is not None:
                    raise (Closed if self._ended == "closed" else TopicNotFound)(
                        f"topic {self.name} is {self._ended}"
                    )
                assert self._opener is not None
                self._logs = self._opener(self)
            return self._logs

    @property
    def opened(self) -> bool:
        """Whether the logs are open (or can no longer be: deleted, closed)."""
        return self._logs is not None or self._ended is not None

    def end(self, why: str) -> list[PartitionLog]:
        """The topic is deleted or the broker closed (`why`): its open logs, for the
        caller to close; none will be opened again."""
        with self._opening:
            self._ended = why
            logs, self._logs = self._logs or [], None
        return logs

    def info(self) -> TopicInfo:
        return TopicInfo(
            name=self.name,
            partitions=self.config.partitions,
            retention_ms=self.config.retention_ms,
            retention_bytes=self.config.retention_bytes,
            compaction=self.config.compaction,
            end_offsets={p.partition: p.durable_offset for p in self.logs},
            lake=self.config.lake,
            value_schema=self.config.value_schema,
        )

    def log(self, partition: int) -> PartitionLog:
        """The partition's log; PartitionNotFound if the topic has no such partition."""
        if not 0 <= partition < self.config.partitions:
            raise PartitionNotFound(f"topic {self.name} has no partition {partition}")
        return self.logs[partition]


def open_unless_deleted(state: TopicState) -> None:
    with contextlib.suppress(TopicNotFound):  # deleted since the slice was chosen
        state.logs  # noqa: B018  (opens them)
