"""`brook serve` with its local disk behind the test-only faulty wrapper
(brook/storage/faulty.py), switched by signals from the chaos runner:

- SIGUSR1: the disk fills up (appends write half their bytes and fail with ENOSPC,
  whole-file writes and creates fail); a second SIGUSR1 frees it again.
- SIGUSR2: the next few fsyncs fail with EIO.
- SIGRTMIN: the wall clock steps to the real time plus the seconds written in the file
  named by BROOK_CHAOS_CLOCK (an operator or NTP setting the clock; 0 puts it right).
  Every wall-clock reading of the process steps, as when the machine's clock is set:
  `time.time` is replaced before Brook is imported (its clocks default to it).

Everything else is `brook serve` as users run it: the same command line, config,
server and shutdown; only the storage it opens is wrapped.
Run as `python -m tests.chaos.faulty_serve --config FILE serve --data DIR --port N`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

_real_time = time.time
_offset_s = 0.0


def _stepped_time() -> float:
    return _real_time() + _offset_s


def _step_clock(signum: int, frame: object) -> None:
    global _offset_s
    with open(os.environ["BROOK_CHAOS_CLOCK"]) as given:
        _offset_s = float(given.read())
    print(f"chaos: the wall clock is off by {_offset_s:+.1f} s", file=sys.stderr, flush=True)


time.time = _stepped_time  # before Brook is imported: see the module's docstring
if __name__ == "__main__" and "BROOK_CHAOS_CLOCK" in os.environ:
    signal.signal(signal.SIGRTMIN, _step_clock)  # first thing: a step may come at any time
    _step_clock(signal.SIGRTMIN, None)  # a broker started again keeps the machine's step

# isort: split
from brook.cli import main  # noqa: E402
from brook.storage import Storage  # noqa: E402
from brook.storage import location as locations  # noqa: E402
from brook.storage.faulty import Faults, FaultyStorage  # noqa: E402

EIO_SYNCS = 3
"""fsyncs that fail after each SIGUSR2."""

faults = Faults()
_open_storage = locations.open_storage


def _faulty_open(
    where: locations.Location, options: dict[str, Any], *, must_exist: bool
) -> Storage:
    storage = _open_storage(where, options, must_exist=must_exist)
    return storage if must_exist else FaultyStorage(storage, faults)  # type: ignore[return-value]


def _disk(signum: int, frame: object) -> None:
    faults.disk_full = not faults.disk_full
    print(f"chaos: disk {'full' if faults.disk_full else 'freed'}", file=sys.stderr, flush=True)


def _eio(signum: int, frame: object) -> None:
    faults.sync_failures += EIO_SYNCS
    print(f"chaos: the next {EIO_SYNCS} fsyncs fail (EIO)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    locations.open_storage = _faulty_open  # type: ignore[assignment]
    signal.signal(signal.SIGUSR1, _disk)
    signal.signal(signal.SIGUSR2, _eio)
    main(prog_name="brook")
