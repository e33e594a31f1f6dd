"""Records sent again on demand: one message resent, or the acked records of a span
replayed (queue/replay.py keeps the replays' pure bookkeeping). Part of `QueueGroup`
(queue/shell.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from brook.errors import MessageNotFound, PartitionNotFound
from brook.models import State
from brook.queue import replay

if TYPE_CHECKING:
    from brook.queue.shell import QueueGroup


class Redelivery:
    def resend(self: QueueGroup, partition: int, offset: int) -> str:
        """Send the record at (partition, offset) once more, whatever became of it: an
        acked one is brought back alone (a replay of one offset), a dead one redriven;
        one still on its way goes anyway. Durable before it returns; says which:
        "resent", "redriven" or "pending". MessageNotFound when there is no such record
        (retention removed it)."""
        logs = self.core.topic_state(self.topic).logs
        if not 0 <= partition < len(logs):
            raise PartitionNotFound(f"topic {self.topic} has no partition {partition}")
        log = logs[partition]
        if not log.start_offset <= offset < log.durable_offset:
            raise MessageNotFound(
                f"topic {self.topic} partition {partition} holds no record at offset {offset} "
                f"(it holds {log.start_offset} to {log.durable_offset - 1})"
            )
        with self.mutex:
            self._check_usable()
            self._offer()
            job = self.machine.jobs.get((partition, offset))
            taken_in = offset < self.offered.get(partition, 0)
            if job is not None and job.state is State.DEAD:
                dead = True
            elif (
                job is not None
                or not taken_in
                or any(r.covers(offset) for r in self.replaying.get(partition, []))
            ):
                return "pending"
            else:
                dead = False
        if dead:
            return "redriven" if self.redrive(None, [(partition, offset)]) else "pending"
        return "resent" if self.replay(partition, offset, until=offset + 1) else "pending"

    def replay(
        self: QueueGroup,
        partition: int | None = None,
        offset: int | None = None,
        since_ms: int | None = None,
        until: int | None = None,
    ) -> int:
        """Send again the acked records from `offset` on (of `partition`, or of each),
        or those stamped at or after `since_ms`, up to what the group has taken in now
        (or up to offset `until`); the records not finished are left as they are (they
        go anyway, and dead ones go back with a redrive). Durable before it returns;
        returns how many records it brings back (queue/replay.py)."""
        logs = self.core.topic_state(self.topic).logs
        if partition is not None and partition >= len(logs):
            raise PartitionNotFound(f"topic {self.topic} has no partition {partition}")
        chosen = logs if partition is None else [logs[partition]]
        starts = {
            pl.partition: pl.offset_at(since_ms) if since_ms is not None else offset or 0
            for pl in chosen
        }
        with self.mutex:
            self._check_usable()
            self._offer()
            now = self._now_ms()
            kept: dict[int, list[int]] = {}
            for p, o in self.machine.jobs:
                kept.setdefault(p, []).append(o)
            count = 0
            for p, from_offset in starts.items():
                first = max(from_offset, logs[p].start_offset)
                stop = self.offered.get(p, 0)
                if until is not None:
                    stop = min(stop, until)
                if first >= stop:
                    continue
                replays, brings = replay.ask(
                    self.replaying.get(p, []), first, stop, now, kept.get(p, ())
                )
                if brings:
                    self.replaying[p] = replays
                    count += brings
            if not count:
                return 0
            request = self._submit([], snapshot=self._snapshot())
            self._changes_since_snapshot = 0
        # (Its entry's commit round wakes the leases waiting: has_work sees the replay.)
        self.snapshot_offset = max(self.snapshot_offset, self._wait(request))
        return count
