"""The fault schedule, drawn from the seed: which fault, when, for how long. Pure: the
same seed and length give the same schedule (the runner applies it to real processes)."""

from __future__ import annotations

import random
from typing import NamedTuple

KINDS = ("kill9", "pause", "kill9", "receiver-down", "worker-kill9", "worker-pause")
"""Each drawn with equal chance: a broker `kill -9` (then started again), a
SIGSTOP/SIGCONT of the broker, a receiver that stops answering for a while, a task
worker process killed (then started again) or stopped and continued."""
WORKERS = 2
"""How many worker processes a fault may pick from (its `target`)."""
QUIET_S = (4.0, 12.0)
"""The time between the end of one fault and the start of the next."""
LENGTH_S = (0.5, 4.0)


class Fault(NamedTuple):
    at_s: float
    """Seconds after the run's start."""
    kind: str
    length_s: float
    target: int = 0
    """Which worker process (for the worker faults)."""


def schedule(seed: int, seconds: float) -> list[Fault]:
    """The faults of a run of `seconds` (none in its last fifth: the run ends quiet)."""
    rng = random.Random(seed)
    faults = []
    at = rng.uniform(*QUIET_S) / 2
    while at < seconds * 0.8:
        kind = rng.choice(KINDS)
        length = round(rng.uniform(*LENGTH_S), 2)
        target = rng.randrange(WORKERS)
        faults.append(Fault(round(at, 2), kind, length, target))
        at += length + rng.uniform(*QUIET_S)
    return faults
