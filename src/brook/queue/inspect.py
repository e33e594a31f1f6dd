"""Where each record of a queue group stands, as its status log tells it. Pure.

For looking in from outside the broker (`brook spark queue`): the same fold a
restart does (status.fold, lifecycle.replay), kept per record and without the
topic. A record the log says nothing about is classified by `standing_of`:
acked below the snapshot's floor or inside one of its acked runs, otherwise
ready (untouched, or not yet seen by the group).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from typing import NamedTuple

from brook.models import State, Transition
from brook.queue import lifecycle as lc
from brook.queue.lifecycle import JobState
from brook.queue.status import Entry, Position, fold


class Touched(NamedTuple):
    """A record the status log names: its job, and its latest transition still in the
    retained log (None when that is older than what retention kept)."""

    job: JobState
    changed: Transition | None


class GroupState(NamedTuple):
    floor: dict[int, int]
    """Per partition: every record below is acked (from the newest snapshot)."""
    acked: dict[int, list[tuple[int, int]]]
    """Per partition: runs [first, stop) of acked records above the floor, in order."""
    touched: dict[Position, Touched]


def group_state(entries: Iterable[tuple[int, Entry]]) -> GroupState:
    """The state of every record the status log (offset, entry pairs, oldest first) knows."""
    latest: dict[Position, Transition] = {}

    def noted() -> Iterable[tuple[int, Entry]]:
        for offset, entry in entries:
            for p, o, transition in entry.changes:
                latest[(p, o)] = transition
            yield offset, entry

    folded = fold(noted())
    jobs: dict[Position, JobState] = {}
    floor: dict[int, int] = {}
    acked: dict[int, list[tuple[int, int]]] = {}
    if folded.snapshot is not None:
        jobs = {(p, o): job for p, o, job in folded.snapshot.jobs}
        floor = dict(folded.snapshot.floor)
        for p, first, stop in sorted(folded.snapshot.acked):
            acked.setdefault(p, []).append((first, stop))
    for position, transition in folded.changes:
        before = jobs.get(position) or lc.new_job(transition.at_ms)
        jobs[position] = lc.replay(before, transition)
    touched = {position: Touched(job, latest.get(position)) for position, job in jobs.items()}
    return GroupState(floor, acked, touched)


def standing_of(state: GroupState, partition: int, offset: int) -> Touched | State:
    """A record's standing: what the log says of it, or, for a record it does not
    name, READY or ACKED."""
    found = state.touched.get((partition, offset))
    if found is not None:
        return found
    if offset < state.floor.get(partition, 0):
        return State.ACKED
    runs = state.acked.get(partition, [])
    i = bisect_right(runs, (offset, float("inf"))) - 1
    if i >= 0 and runs[i][0] <= offset < runs[i][1]:
        return State.ACKED
    return State.READY
