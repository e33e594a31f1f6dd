"""A queue group's whole state written to its status log now and then, so a restart
reads from the newest snapshot and older status segments can go. Part of
`QueueGroup` (queue/shell.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from brook import limits
from brook.commit import AppendRequest, Waiter
from brook.queue import status

if TYPE_CHECKING:
    from brook.queue.shell import QueueGroup


class Snapshots:
    def _maybe_snapshot(self: QueueGroup) -> None:
        """Holding the mutex: after enough changes, append the whole state, so a
        restart reads from there and older status segments can go."""
        # A snapshot costs about as much as the records kept: spacing them by at
        # least twice that keeps their cost per change constant.
        due = max(limits.queue_snapshot_changes, 2 * len(self.machine.jobs))
        if self._changes_since_snapshot < due:
            return
        self.write_snapshot()

    def write_snapshot(self: QueueGroup) -> Waiter:
        """Holding the mutex: queue a snapshot entry; `snapshot_offset` follows once durable."""
        snapshot = self._snapshot()
        waiter = Waiter()

        def durable(done: AppendRequest) -> None:
            if done.error is None and done.acks:
                self.snapshot_offset = max(self.snapshot_offset, done.acks[0].offset)
            waiter(done)

        self._submit([], snapshot=snapshot, on_done=durable)
        self._changes_since_snapshot = 0
        return waiter

    def _snapshot(self: QueueGroup) -> status.Snapshot:
        """Holding the mutex: the whole state, as a snapshot entry holds it."""
        machine = self.machine
        kept: dict[int, list[int]] = {p: [] for p in self.offered}
        for p, o in machine.jobs:
            kept.setdefault(p, []).append(o)
        floor: dict[int, int] = {}
        acked: list[tuple[int, int, int]] = []
        for p, offsets in kept.items():
            offsets.sort()
            end = self.offered.get(p, 0)
            floor[p] = offsets[0] if offsets else end
            # The gaps between records still kept are acked.
            for before, after in zip(offsets, [*offsets[1:], end], strict=False):
                if after > before + 1:
                    acked.append((p, before + 1, after))
        return status.Snapshot(
            offered=dict(self.offered),
            floor=floor,
            acked=acked,
            jobs=[(p, o, job) for (p, o), job in machine.jobs.items() if not job.untouched],
            unlettered=[(p, o, at) for (p, o), at in sorted(self._unlettered.items())],
            acked_count=machine.acked,
            results=self.results.rows(),
            replaying=[r.row(p) for p, rs in sorted(self.replaying.items()) for r in rs],
        )
