"""How a bucket's run files are merged, as bytes. Pure.

Every flush adds a run file to each bucket it touched (brook/timers/files.py), so
a busy bucket would gather hundreds. A flush that would leave `most` runs in a
bucket merges its new run with the newest older ones instead, size-tiered as an
LSM tree's levels are: it takes older runs, newest first, while each is no
bigger than all it took so far. A bucket then holds runs of roughly doubling
size, and a timer's bytes are rewritten about log2(bucket / flush) times in
the bucket's life. Merging every run each time instead rewrote the whole
bucket every `most` flushes: quadratic in the bucket's size, and a memory peak
that grew with it (the soak's current-hour bucket, whose runs keep every timer
fired in the hour, was decoded and encoded again every 80 seconds).

A merge never decodes a whole entry: entries stay msgpack bytes (`msgspec.Raw`)
and only the id and end time are read from them, so merging costs about the
bytes merged, not a Python object per timer.

What a merge may drop, so that a restart restoring every run of the bucket
still finds what the log told:
- a timer whose end (fired or cancelled) is in the merge: the end says all;
- an end older than the history, only when the merge takes every run of the
  bucket: else the timer it ends may be in an older run left out, and would
  come back pending without it.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec


class _RunEntries(msgspec.Struct, array_like=True, frozen=True):
    """A run (files.Run) with its entries left encoded."""

    timers: list[msgspec.Raw]
    ended: list[msgspec.Raw]


class _TimerId(msgspec.Struct, array_like=True, frozen=True):
    """A Timer's first field; the rest of the array is not decoded."""

    id: str


class _End(msgspec.Struct, frozen=True):
    """The two fields of a TimerInfo a merge reads; the others are skipped."""

    timer_id: str
    at_ms: int | None = None


_decode_run = msgspec.msgpack.Decoder(_RunEntries).decode
_decode_timer_id = msgspec.msgpack.Decoder(_TimerId).decode
_decode_end = msgspec.msgpack.Decoder(_End).decode
_encode = msgspec.msgpack.Encoder().encode


def runs_to_merge(older_sizes: Sequence[int], new_size: int, most: int) -> int:
    """How many of a bucket's older runs (sizes in bytes, oldest first) a flush
    merges with its new run of `new_size` bytes: none while the bucket would keep
    fewer than `most` runs; else the newest ones, at least one, going back while
    each is no bigger than the new run and those taken so far together."""
    if len(older_sizes) + 1 < most:
        return 0
    taken, total = 0, new_size
    for size in reversed(older_sizes):
        if taken and size > total:
            break
        taken += 1
        total += size
    return taken


def merge(runs: Sequence[bytes], whole: bool, history_since_ms: int) -> bytes:
    """One run file holding what `runs` (a bucket's consecutive runs, oldest first)
    hold. `whole`: they are every run of the bucket, so ends before
    `history_since_ms` can go too."""
    parts = [_decode_run(data) for data in runs]
    timers = [raw for part in parts for raw in part.timers]
    ends = [raw for part in parts for raw in part.ended]
    # A set of the fewer ids: a future bucket holds many timers and few ends, the
    # current one many ends and few timers. Entries are decoded again rather
    # than kept decoded.
    if len(ends) <= len(timers):
        gone = {_decode_end(raw).timer_id for raw in ends}
    else:
        present = {_decode_timer_id(raw).id for raw in timers}
        gone = {i for raw in ends if (i := _decode_end(raw).timer_id) in present}
    if gone:
        timers = [raw for raw in timers if _decode_timer_id(raw).id not in gone]
    if whole:
        ends = [raw for raw in ends if (_decode_end(raw).at_ms or 0) >= history_since_ms]
    return _encode(_RunEntries(timers, ends))
