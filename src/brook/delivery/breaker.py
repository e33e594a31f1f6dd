"""One endpoint's circuit breaker (SPEC §7). Pure: the time is passed in.

    closed ──(most recent attempts failed)──▶ open ──(pause over)──▶ half-open
      ▲                                        ▲                        │ one probe
      └──────────────(the probe succeeded)─────┼────────────────────────┤
                                               └──(the probe failed: a longer pause)

While open, nothing is sent to the endpoint: its records wait in their queue
group (their attempts are not spent on a known-bad endpoint), and the workers
serve other endpoints. A failure is an attempt that would be retried (5xx, 408,
429, timeout, connection); a 2xx, and a 4xx that refuses one record, show the
endpoint is up.
"""

from __future__ import annotations

import collections
import enum

WINDOW = 20
"""The most recent attempts looked at."""
MINIMUM = 10
"""...of which at least this many must be known before their share can open it,"""
FAILED_SHARE = 0.5
"""...and more than this share of them failed. Or:"""
FAILED_IN_A_ROW = 5
"""...this many failed one after another (a quiet endpoint gets there first)."""
PAUSE_MS_MIN = 1_000
PAUSE_MS_MAX = 5_000
"""The pause before a probe doubles after each failed probe, up to this: one request
every 5 s costs a dead endpoint nothing (a record's attempt each, at 0.2/s), and an
endpoint back after an outage is found within 5 s, which is most of what its backlog
waits beyond its own draining."""


class State(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Breaker:
    def __init__(self) -> None:
        self.state = State.CLOSED
        self._recent: collections.deque[bool] = collections.deque(maxlen=WINDOW)
        """True for each failed attempt among the most recent."""
        self._in_a_row = 0
        self.pause_ms = PAUSE_MS_MIN
        self.open_until_ms = 0
        self._probing = False
        self.opened = 0
        """How often it opened (for metrics)."""

    def allows(self, now_ms: int) -> bool:
        """May an attempt start now? In half-open, only one (the probe) until it ends."""
        if self.state is State.CLOSED:
            return True
        if self.state is State.OPEN:
            if now_ms < self.open_until_ms:
                return False
            self.state = State.HALF_OPEN
        return not self._probing

    def started(self) -> bool:
        """An allowed attempt was sent; whether it is the probe (to give to `ended`)."""
        if self.state is State.HALF_OPEN:
            self._probing = True
            return True
        return False

    def ended(self, failed: bool, now_ms: int, probe: bool = False) -> None:
        """An attempt's outcome. Attempts sent before the breaker opened end in their
        own time: they do not count once it is open, nor do they stand for the probe."""
        if probe:
            self._probing = False
            if failed:
                self.pause_ms = min(self.pause_ms * 2, PAUSE_MS_MAX)
                self._open(now_ms)
            else:
                self.state = State.CLOSED
                self.pause_ms = PAUSE_MS_MIN
                self._recent.clear()
                self._in_a_row = 0
            return
        if self.state is not State.CLOSED:
            return  # an attempt sent before it opened: already counted in
        self._recent.append(failed)
        self._in_a_row = self._in_a_row + 1 if failed else 0
        failures = sum(self._recent)
        if self._in_a_row >= FAILED_IN_A_ROW or (
            len(self._recent) >= MINIMUM and failures > FAILED_SHARE * len(self._recent)
        ):
            self._open(now_ms)

    def next_probe_ms(self) -> int | None:
        """When an open breaker lets a probe through; None when it is not open."""
        return self.open_until_ms if self.state is State.OPEN else None

    def _open(self, now_ms: int) -> None:
        self.state = State.OPEN
        self.open_until_ms = now_ms + self.pause_ms
        self.opened += 1
