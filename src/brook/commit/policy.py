"""When to close a batch: a pure function of what is pending and the time.

A batch closes at the first of:
- its bytes reach `batch_bytes_max`;
- it holds as many requests as the previous batch did. Producers that wait
  for their ack come back in the same numbers; once they are all back, nobody
  else is coming soon and lingering would only add latency;
- `linger_ms` has passed since its first request arrived;
- its first request came after a quiet spell (no round taken for `linger_ms`
  before it): whoever sent the last round is not coming back in step, so waiting
  for as many again would only add latency.

But while the disk is still syncing earlier rounds, a batch keeps gathering (up to
`linger_ms`, or its bytes): it cannot be durable before that sync ends anyway, and
closing it at "as many as the last round" let rounds shrink to one request each
under a steady stream of arrivals (any size is a fixed point of that rule), so every
request paid a round's work of its own. Gathering while the disk is busy sizes rounds
to what arrives during one sync: group commit proper.

With one producer this flushes at once (no added latency); with 64 producers
each holding one record in flight, the first batch lingers to gather them and
later ones close as soon as all 64 are back.
"""

from __future__ import annotations


def flush_delay(
    now_s: float,
    first_arrival_s: float,
    pending_requests: int,
    pending_bytes: int,
    previous_requests: int,
    linger_s: float,
    batch_bytes_max: int,
    quiet_s: float = 0.0,
    syncing: bool = False,
) -> float:
    """Seconds to keep gathering before writing the pending batch; 0 means write now.
    `quiet_s`: how long no round had been taken when the batch's first request came;
    `syncing`: earlier rounds are being synced now."""
    if pending_requests == 0:
        return linger_s
    left = min(linger_s, max(0.0, linger_s - (now_s - first_arrival_s)))
    if pending_bytes >= batch_bytes_max:
        return 0.0
    if syncing:
        return left
    if pending_requests >= previous_requests:
        return 0.0
    if quiet_s >= linger_s:
        return 0.0
    return left


def checkpoint_delay(
    now_s: float,
    last_s: float,
    interval_s: float,
    wal_bytes: int,
    wal_bytes_trigger: int,
    dirty_files: int,
    dirty_files_trigger: int,
) -> float:
    """Seconds until the next checkpoint should begin; 0 means now (commit/checkpoint.py).

    A checkpoint begins once anything was written since the last one and the first of:
    `interval_s` has passed since it; the WAL past it holds `wal_bytes_trigger` bytes
    (so a round rarely has to wait for one, and a restart replays little); or
    `dirty_files_trigger` segments were written since (each keeps a descriptor until
    synced). Nothing written: nothing to do, look again after an interval.
    """
    if dirty_files == 0:
        return interval_s
    if wal_bytes >= wal_bytes_trigger or dirty_files >= dirty_files_trigger:
        return 0.0
    return max(0.0, interval_s - (now_s - last_s))
