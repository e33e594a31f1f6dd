"""One endpoint's rate limit: sends spaced at least 1/rate apart. Pure: the time
is passed in.

A token bucket with room for a burst would let a second hold the burst and a
second's worth of tokens: up to twice the rate. Here there is no burst (the
generic cell rate algorithm with no tolerance): each send takes the next slot,
`1/rate` after the one before, so any second holds at most `rate` sends for a
whole-number rate. A send is counted when it starts, by the worker about to send,
so a delay between the permission and the send cannot bunch sends together.
"""

from __future__ import annotations

_SLACK_MS = 1e-9
"""A time computed as `now + wait_ms(now)` may round to just short of the slot."""


class Pacing:
    def __init__(self, rate_per_s: int | None) -> None:
        self.interval_ms = None if rate_per_s is None else 1000.0 / rate_per_s
        self._next_ms = 0.0
        """The earliest time the next send may start."""

    def wait_ms(self, now_ms: float) -> float:
        """How long until a send may start (0: now)."""
        if self.interval_ms is None:
            return 0.0
        return max(0.0, self._next_ms - now_ms)

    def take(self, now_ms: float) -> bool:
        """Start a send now if the rate allows; whether it does."""
        if self.interval_ms is None:
            return True
        if now_ms + _SLACK_MS < self._next_ms:
            return False
        # From the send itself, not from the slot it was due: a late send must not let
        # the next one follow it closer than the interval.
        self._next_ms = max(now_ms, self._next_ms) + self.interval_ms
        return True
