"""The broker's time, one injectable object.

Wall time (ms since the epoch) stamps records and says when timers and leases
are due; monotonic time measures waits and intervals, which must not jump when
the wall clock is set. Tests pass a clock they move by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Clock:
    def __init__(
        self,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.wall = wall
        """Seconds since the epoch (may step)."""
        self.monotonic = monotonic
        """Seconds from an arbitrary start (never steps back)."""

    def now_ms(self) -> int:
        """Wall time in whole ms since the epoch."""
        return int(self.wall() * 1000)

    @classmethod
    def of(cls, given: Clock | Callable[[], float]) -> Clock:
        """A Clock as given, or one whose wall time is the given function."""
        return given if isinstance(given, Clock) else cls(wall=given)
