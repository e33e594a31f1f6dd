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
) -> float:
    """Seconds to keep gathering before writing the pending batch; 0 means write now.
    `quiet_s`: how long no round had been taken when the batch's first request came."""
    if pending_requests == 0:
        return linger_s
    if pending_bytes >= batch_bytes_max or pending_requests >= previous_requests:
        return 0.0
    if quiet_s >= linger_s:
        return 0.0
    return min(linger_s, max(0.0, linger_s - (now_s - first_arrival_s)))
