"""The timer log's entries, bucket files and the checkpoint, as bytes. Pure.

- The timer log (`topics/__timers/0/`, written through the committer) gets one
  `LogEntry` per call: timers scheduled, and timers that ended (fired or
  cancelled). It is what makes a call durable.
- A flush writes, for each bucket touched since the last one, one immutable run
  file `timers/buckets/<bucket start>/<flush number>.run` with that bucket's new
  timers and ended ones, then the checkpoint `timers/checkpoint.json` naming the
  flush and the log offset it covers. Log segments before it can then go.
- On start, runs of flushes after the checkpoint's are left over from a flush cut
  short: they are ignored (the log still holds what they hold).
"""

from __future__ import annotations

import msgspec

from brook.models import TimerInfo
from brook.timers.model import Timer


class LogEntry(msgspec.Struct, array_like=True, frozen=True, omit_defaults=True):
    scheduled: list[Timer] = []
    ended: list[TimerInfo] = []


class Run(msgspec.Struct, array_like=True, frozen=True):
    timers: list[Timer]
    ended: list[TimerInfo]


class RunTimers(msgspec.Struct, array_like=True, frozen=True):
    """A Run's timers alone: its ends are skipped, not decoded."""

    timers: list[Timer]


class Checkpoint(msgspec.Struct, frozen=True):
    flush: int = 0
    """The newest flush whose runs are all durable."""
    log_offset: int = 0
    """Every log entry before this offset is in runs of flushes up to `flush`."""


encode = msgspec.msgpack.Encoder().encode
decode_entry = msgspec.msgpack.Decoder(LogEntry).decode
decode_run = msgspec.msgpack.Decoder(Run).decode
decode_run_timers = msgspec.msgpack.Decoder(RunTimers).decode
decode_checkpoint = msgspec.json.Decoder(Checkpoint).decode
