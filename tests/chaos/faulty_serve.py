"""`brook serve` with its local disk behind the test-only faulty wrapper
(brook/storage/faulty.py), switched by signals from the chaos runner:

- SIGUSR1: the disk fills up (appends write half their bytes and fail with ENOSPC,
  whole-file writes and creates fail); a second SIGUSR1 frees it again.
- SIGUSR2: the next few fsyncs fail with EIO.

Everything else is `brook serve` as users run it: the same command line, config,
server and shutdown; only the storage it opens is wrapped.
Run as `python -m tests.chaos.faulty_serve --config FILE serve --data DIR --port N`.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

from brook.cli import main
from brook.storage import Storage
from brook.storage import location as locations
from brook.storage.faulty import Faults, FaultyStorage

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
