"""What the delivery loop saw of one endpoint's attempts, for `stats` and /metrics.
Kept in memory (the status log holds every attempt durably; these are figures)."""

from __future__ import annotations

import bisect
import collections
import threading

from brook import limits
from brook.delivery.outcome import Action, Result, Verdict
from brook.records import Histogram, Job, Recent

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""The attempt-latency histogram's upper bounds (seconds) for /metrics."""


class EndpointStats:
    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self.attempts: collections.Counter[str] = collections.Counter()
        """Attempts by outcome: the action taken (ack, retry, dead, disable)."""
        self.statuses: collections.Counter[str] = collections.Counter()
        """Attempts by HTTP status, or error kind when there was none."""
        self._recent: collections.deque[tuple[bool, float]] = collections.deque(
            maxlen=limits.delivery_stats_recent_attempts
        )
        self.last_error = ""
        self.last_error_ms = 0
        self.failing_since_ms: int | None = None
        """When the first attempt failed after the last one that succeeded (None while
        they succeed); counted since start."""
        self.latency_counts = [0] * (len(LATENCY_BUCKETS_S) + 1)
        """Attempts per latency bucket (the last: above every bound)."""
        self.latency_sum_s = 0.0
        self._last: collections.deque[Recent] = collections.deque(
            maxlen=limits.delivery_stats_recent_shown
        )

    def record(
        self, result: Result, verdict: Verdict, now_ms: int = 0, job: Job | None = None
    ) -> None:
        with self._mutex:
            self.attempts[verdict.action.value] += 1
            key = status_of(result)
            self.statuses[key] += 1
            ok = verdict.action is Action.ACK
            self._recent.append((ok, result.latency_ms))
            seconds = result.latency_ms / 1000
            self.latency_counts[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
            self.latency_sum_s += seconds
            if not ok:
                self.last_error = verdict.reason
                self.last_error_ms = now_ms
                if self.failing_since_ms is None:
                    self.failing_since_ms = now_ms
            else:
                self.failing_since_ms = None
            if job is not None:
                r = job.record
                self._last.append(
                    Recent(
                        at_ms=now_ms,
                        topic=r.topic,
                        partition=r.partition,
                        offset=r.offset,
                        attempt=job.attempt,
                        outcome=verdict.action.value,
                        status=key,
                        latency_ms=result.latency_ms,
                        reason="" if ok else verdict.reason,
                    )
                )

    def latency_histogram(self) -> Histogram:
        with self._mutex:
            return Histogram(
                bounds=LATENCY_BUCKETS_S, counts=list(self.latency_counts), sum=self.latency_sum_s
            )

    def recent(self) -> list[Recent]:
        """The most recent attempts, newest first."""
        with self._mutex:
            return list(reversed(self._last))

    def success_rate(self) -> float | None:
        """The share of recent attempts answered 2xx; None before any."""
        with self._mutex:
            if not self._recent:
                return None
            return sum(ok for ok, _ in self._recent) / len(self._recent)

    def latency_ms(self, quantile: float) -> float | None:
        """A quantile (0.5, 0.99) of recent attempts' latency; None before any."""
        with self._mutex:
            if not self._recent:
                return None
            ordered = sorted(latency for _, latency in self._recent)
        index = min(len(ordered) - 1, int(quantile * len(ordered)))
        return round(ordered[index], 3)


def status_of(result: Result) -> str:
    """How an attempt is counted: its HTTP status, or its error kind when there was none."""
    if result.status is not None:
        return str(result.status)
    return str(result.error.value if result.error else "error")


class Totals:
    """Attempts over every endpoint since the start, deleted endpoints' too: /metrics'
    aggregates, counted as attempts end, so a scrape costs nothing per endpoint and a
    counter never goes back when an endpoint goes."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self.attempts: collections.Counter[str] = collections.Counter()
        self.statuses: collections.Counter[str] = collections.Counter()
        self.latency_counts = [0] * (len(LATENCY_BUCKETS_S) + 1)
        self.latency_sum_s = 0.0

    def record(self, result: Result, verdict: Verdict) -> None:
        seconds = result.latency_ms / 1000
        with self._mutex:
            self.attempts[verdict.action.value] += 1
            self.statuses[status_of(result)] += 1
            self.latency_counts[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
            self.latency_sum_s += seconds

    def snapshot(self) -> tuple[dict[str, int], dict[str, int], Histogram]:
        """Attempts by outcome, by status, and their latency, as they stand."""
        with self._mutex:
            return (
                dict(self.attempts),
                dict(self.statuses),
                Histogram(
                    bounds=LATENCY_BUCKETS_S,
                    counts=list(self.latency_counts),
                    sum=self.latency_sum_s,
                ),
            )
