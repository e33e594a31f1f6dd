"""The task app a chaos run's `brook worker` processes run (`tests.chaos.tasks_app:app`).

Its tasks share one queue the way an app's tasks do, and each notes what it ran, for
which job, from when to when, in its worker process's own history (a JSONL line
flushed as it happens: a worker killed with SIGKILL keeps every line it wrote):
- `charge(order)`: keyed, at most one run of a key at a time (`concurrency_per_key=1`);
- `flaky(n)`: asks for a retry on a job's first attempt, so every job runs twice;
- `later(n, not_before_ms)`: enqueued with a delay, never to run before it;
- `urgent(n)`: enqueued at a high priority;
- `tick()`: periodic, every second, once per slot;
- `part(chord, i)` and `gathered(results, chord)`: a chord's members and its callback
  (the workload's chords), noted apart from the runs above.
The broker's address comes from BROOK_CHAOS_URL, the history's folder from
BROOK_CHAOS_HISTORY.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import brook

QUEUE = "chaos.tasks"
TICK_MS = 1000

app = brook.App(os.environ.get("BROOK_CHAOS_URL", "http://127.0.0.1:8080"))


class StreamedHistory:
    """A worker process's history, each event written and flushed as it happens."""

    def __init__(self, folder: Path) -> None:
        self._out = (folder / f"history-worker-{os.getpid()}.jsonl").open("a")
        self._lock = threading.Lock()

    def note(self, kind: str, **fields: Any) -> None:
        event = {"t": time.monotonic(), "p": f"worker-{os.getpid()}", "kind": kind, **fields}
        line = json.dumps(event, sort_keys=True) + "\n"
        with self._lock:
            self._out.write(line)
            self._out.flush()


_history: StreamedHistory | None = None


def _note(kind: str, **fields: Any) -> None:
    global _history
    if _history is None:
        _history = StreamedHistory(Path(os.environ.get("BROOK_CHAOS_HISTORY", ".")))
    job = brook.current_job()
    _history.note(kind, ref=job.ref, task=job.task, attempt=job.attempt, key=job.key, **fields)


def _run(name: str, args: list[Any], work_s: float) -> None:
    _note("run-start", ran=name, args=args, wall_ms=int(time.time() * 1000))
    time.sleep(work_s)
    _note("run-end", ran=name)


@app.task(queue=QUEUE, concurrency_per_key=1, max_attempts=1000, visibility_timeout_ms=6000,
          backoff={"min_ms": 50, "max_ms": 500})  # fmt: skip
def charge(order: str) -> str:
    _run("charge", [order], 0.03)
    return order


@app.task(queue=QUEUE)
def flaky(n: int) -> int:
    _run("flaky", [n], 0.005)
    if brook.current_job().attempt == 1:
        raise brook.Retry("the first attempt always fails", delay_ms=50)
    return n


@app.task(queue=QUEUE)
def later(n: int, not_before_ms: int) -> int:
    _run("later", [n, not_before_ms], 0.005)
    return n


@app.task(queue=QUEUE)
def urgent(n: int) -> int:
    _run("urgent", [n], 0.005)
    return n


@app.periodic(every_ms=TICK_MS, queue=QUEUE)
def tick() -> None:
    _run("tick", [], 0.0)


@app.task(queue=QUEUE)
def part(chord: str, i: int) -> int:
    _note("chord-member", chord=chord, i=i)
    return i * i


@app.task(queue=QUEUE)
def gathered(results: list[int], chord: str) -> int:
    _note("chord-callback", chord=chord, results=results)
    return sum(results)
