"""The broker's time, one injectable object.

Wall time (ms since the epoch) stamps records and says when timers and leases
are due; monotonic time measures waits and intervals, which must not jump when
the wall clock is set. Tests pass a clock they move by hand.

Deleting records by age uses `elapsed_ms`: the wall time, but never ahead of
the time that has really passed since the broker started. A wall clock stepped
forward (a bad NTP server, an operator's typo) fires timers and ends leases it
passes, as it should, but it cannot make records old enough to delete: that
would lose data nothing asked to lose. A clock stepped back only delays.
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
        self._started = (wall(), monotonic())

    def now_ms(self) -> int:
        """Wall time in whole ms since the epoch."""
        return int(self.wall() * 1000)

    def elapsed_ms(self) -> int:
        """Wall time in ms, but never more than the wall time at the start plus the
        monotonic time since: what record ages are measured against (see above)."""
        wall_then, monotonic_then = self._started
        return int(min(self.wall(), wall_then + self.monotonic() - monotonic_then) * 1000)

    @classmethod
    def of(cls, given: Clock | Callable[[], float]) -> Clock:
        """A Clock as given, or one whose wall time is the given function."""
        return given if isinstance(given, Clock) else cls(wall=given)
