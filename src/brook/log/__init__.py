"""The log layer: partition logs of checksummed segments, their recovery, retention
and compaction, and the read-only view used by readers outside the broker."""
