"""Counters the broker keeps about itself: plain integers, cheap to bump.

The server turns them into Prometheus metrics when scraped (server/metrics.py);
the core itself does not depend on any metrics library.
"""

from __future__ import annotations

from bisect import bisect_left

BATCH_SECONDS_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class CommitStats:
    """What the committer did. Updated by its threads; read by anyone (a scrape may
    see one counter a round ahead of another, never a torn number)."""

    def __init__(self) -> None:
        self.records_appended = 0
        self.bytes_appended = 0
        self.batches_written = 0
        self.syncs = 0
        """Syncs that made rounds durable: of the write-ahead log, or of a partition's
        segment where there is no WAL (object storage: one PUT each)."""
        self.failed_batches = 0
        self.rounds = 0
        self.checkpoints = 0
        self.checkpoint_syncs = 0
        """Segment syncs made by checkpoints (the rest of a record's durable cost)."""
        self.wal_bytes = 0
        self.wal_pending_bytes = 0
        """The write-ahead log past the last checkpoint (a gauge)."""
        self.batch_seconds_counts = [0] * (len(BATCH_SECONDS_BUCKETS) + 1)
        """Per bucket (the last is +Inf), not cumulative."""
        self.batch_seconds_sum = 0.0

    def observe_batch(self, seconds: float) -> None:
        """One batch from the writer taking it to its callers being answered."""
        self.batch_seconds_counts[bisect_left(BATCH_SECONDS_BUCKETS, seconds)] += 1
        self.batch_seconds_sum += seconds
