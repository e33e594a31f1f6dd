"""The fault schedule, drawn from the seed: which fault, when, for how long. Pure: the
same seed and length give the same schedule (the runner applies it to real processes)."""

from __future__ import annotations

import random
from typing import NamedTuple

KINDS = ("kill9", "pause", "kill9", "restart", "receiver-down", "worker-kill9", "worker-pause")
"""Each drawn with equal chance: a broker `kill -9` (then started again), a
SIGSTOP/SIGCONT of the broker, an operator's restart (SIGTERM, then started again), a
receiver that stops answering for a while, a task worker process killed (then started
again) or stopped and continued."""
LOCAL_KINDS = ("disk-full", "eio", "clock-step")
"""Drawn too when the broker keeps its data on a local disk (behind the faulty storage
wrapper): a disk that fills up for a while, fsyncs that fail with EIO, and the broker's
wall clock stepped forward or back for a while (then set right: a second step). Not on
S3, whose leases compare the clocks of two brokers (docs/GUARANTEES.md asks NTP there)."""
S3_KINDS = ("s3-trouble", "take-over")
"""Drawn too when the broker keeps its data on S3: a stretch in which the store answers
503s, loses answers, resets connections and is slow; and a second broker taking the
bucket over from the live one (a rolling deploy), the clients following it through a
front as a load balancer's."""
WORKERS = 2
"""How many worker processes a fault may pick from (its `target`)."""
QUIET_S = (4.0, 12.0)
"""The time between the end of one fault and the start of the next."""
LENGTH_S = (0.5, 4.0)
CLOCK_STEP_S = (2.0, 90.0)
"""How far a clock step moves the broker's wall clock, either way."""
CLOCK_WRONG_S = (5.0, 30.0)
"""How long the clock stays wrong before it is set right (timers and leases fall due meanwhile)."""


class Fault(NamedTuple):
    at_s: float
    """Seconds after the run's start."""
    kind: str
    length_s: float
    target: int = 0
    """Which worker process (for the worker faults)."""
    step_s: float = 0.0
    """How far the clock steps (for `clock-step`; negative: back)."""


def schedule(seed: int, seconds: float, s3: bool = False) -> list[Fault]:
    """The faults of a run of `seconds` (none in its last fifth: the run ends quiet);
    with `s3`, the store's own faults among them."""
    rng = random.Random(seed)
    kinds = KINDS + (S3_KINDS if s3 else LOCAL_KINDS)
    faults = []
    at = rng.uniform(*QUIET_S) / 2
    while at < seconds * 0.8:
        kind = rng.choice(kinds)
        length = round(rng.uniform(*LENGTH_S), 2)
        target = rng.randrange(WORKERS)
        step = 0.0
        if kind == "clock-step":
            step = round(rng.uniform(*CLOCK_STEP_S) * rng.choice((-1, 1)), 1)
            length = round(rng.uniform(*CLOCK_WRONG_S), 2)
        faults.append(Fault(round(at, 2), kind, length, target, step))
        at += length + rng.uniform(*QUIET_S)
    return faults
