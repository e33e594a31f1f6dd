"""What every client did and was told, with times from one clock (CLOCK_MONOTONIC,
which every process on the machine shares), kept as JSON lines: the checker reads
nothing else of the run but the final state it asks the broker for."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any


class History:
    """One process's history: events appended by its threads, written as JSONL."""

    def __init__(self, path: Path, process: str) -> None:
        self.path = path
        self.process = process
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def note(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Record one event now; returns it."""
        event = {"t": time.monotonic(), "p": self.process, "kind": kind, **fields}
        with self._lock:
            self.events.append(event)
        return event

    def write(self) -> None:
        with self._lock, self.path.open("w") as out:
            for event in self.events:
                out.write(json.dumps(event, sort_keys=True) + "\n")


def read(paths: list[Path]) -> list[dict[str, Any]]:
    """Every event of the histories at `paths`, in time order."""
    events = []
    for path in paths:
        with path.open() as lines:
            events.extend(json.loads(line) for line in lines if line.strip())
    events.sort(key=lambda e: e["t"])
    return events
