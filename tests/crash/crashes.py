"""How a crash test's broker dies: `kill -9`, or a power cut.

`kill -9` ends the process and keeps the kernel's page cache, so every write the
broker made survives, synced or not. A power cut also loses every write not yet
fsynced: the test's data directory then lives on lazyfs (tests/powerloss), and
after each kill the file system's power is cut, dropping unsynced writes, or,
half the time, tearing them (a random half of the unsynced pages survive).

The crash tests take the `crash` fixture (conftest.py) and run once per kind;
the number of cycles is the test's own setting for kill -9, BROOK_POWER_CUTS
for power cuts.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.powerloss.mount import LazyMount

POWER_CUTS = int(os.environ.get("BROOK_POWER_CUTS", "3"))


class Crash:
    """Where a crash test keeps its data, and what happens to it after each kill."""

    def __init__(self, kind: str, data: Path, mount: LazyMount | None) -> None:
        self.kind = kind
        self.data = data
        self.mount = mount
        self.torn = 0

    def cycles(self, kills: int) -> int:
        """How many crash cycles to run: the test's kill count, or BROOK_POWER_CUTS."""
        return kills if self.mount is None else POWER_CUTS

    def after_kill(self, rng: random.Random) -> None:
        """Once the broker is dead: nothing more for kill -9; for a power cut, unsynced
        writes are dropped or (half the time) torn, and the disk comes back."""
        if self.mount is None:
            return
        torn = rng.random() < 0.5
        self.torn += torn
        self.mount.cut(rng.randrange(2**32) if torn else None)

    def describe(self, cycles: int) -> str:
        if self.mount is None:
            return f"{cycles} kills"
        return f"{cycles} power cuts ({self.torn} torn)"
