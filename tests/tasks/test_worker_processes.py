"""`brook worker --processes` under its process supervisor (brook/processes.py), over a
real `brook serve`: a child killed with -9 is replaced and logged, the jobs go on, and a
parent killed with -9 takes its children with it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from tests.tasks.conftest import Workers

STARTED = re.compile(r"worker (\d+) started$")


class Log:
    """What a `brook worker` parent and its children write to their shared stderr."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.messages: list[str] = []
        self._changed = threading.Condition()
        self._process = process
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._process.stderr is not None
        try:
            for line in self._process.stderr:
                try:
                    message = str(json.loads(line).get("msg"))
                except (ValueError, AttributeError):
                    message = line.rstrip()
                with self._changed:
                    self.messages.append(message)
                    self._changed.notify_all()
        except ValueError:  # the fixture closed the pipe at the end
            pass

    def wait_for(self, done: Any, timeout: float = 60.0) -> list[str]:
        with self._changed:
            if not self._changed.wait_for(lambda: done(self.messages), timeout):
                raise AssertionError(f"not within {timeout} s; the log: {self.messages[-8:]}")
            return list(self.messages)

    def started(self, count: int) -> list[int]:
        """The pids of the first `count` children the parent started, once it has."""
        messages = self.wait_for(lambda messages: len(_started(messages)) >= count)
        return _started(messages)[:count]


def _started(messages: list[str]) -> list[int]:
    return [int(m.group(1)) for m in map(STARTED.match, messages) if m]


def _ends(notes: list[dict[str, Any]]) -> Counter[object]:
    return Counter(n["job"] for n in notes if n.get("event") == "end")


def _gone_within(pid: int, timeout: float) -> bool:
    """Whether process `pid` (not a child of this one) ends within `timeout`: waits on
    its pidfd, readable once it has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def _kill_children(parent: subprocess.Popen[str], log: Log) -> None:
    """Kill by pid every child the parent started (those it logged, and those it has
    now), so that none keeps the log's pipe open past the test."""
    pids = set(_started(log.messages))
    tasks = Path(f"/proc/{parent.pid}/task")
    if parent.poll() is None:
        for task in tasks.iterdir():
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in (task / "children").read_text().split())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_child_killed_with_sigkill_is_replaced_and_the_jobs_go_on(workers: Workers) -> None:
    parent = workers.start("--processes", "2", "--concurrency", "2")
    log = Log(parent)
    try:
        first, second = log.started(2)
        os.kill(first, signal.SIGKILL)
        third = log.started(3)[2]
        messages = log.wait_for(lambda _: True)
        assert any(
            m.startswith(f"worker {first} was killed by SIGKILL; starting another in")
            for m in messages
        ), messages
        # The other one too: the jobs below can only run in the replacements.
        os.kill(second, signal.SIGKILL)
        fourth = log.started(4)[3]
        doubled = workers.app.tasks["doubled"]
        for n in range(20):
            doubled.enqueue(f"d{n}", n)
        notes = workers.wait_for(lambda notes: len(_ends(notes)) == 20, timeout=60)
        assert {n["pid"] for n in notes} <= {third, fourth}
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 0, "the replacements drained"
        for pid in (first, second, third, fourth):
            assert _gone_within(pid, 5.0), f"worker process {pid} outlived its parent"
    finally:
        _kill_children(parent, log)


def test_the_children_die_with_a_parent_killed_with_sigkill(workers: Workers) -> None:
    parent = workers.start("--processes", "2", "--concurrency", "2")
    log = Log(parent)
    try:
        children = log.started(2)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        for pid in children:
            assert _gone_within(pid, 3.0), f"worker process {pid} outlived its parent"
    finally:
        _kill_children(parent, log)


def test_a_child_that_cannot_run_makes_the_parent_give_up_at_once(workers: Workers) -> None:
    """The same error would follow each new start: said once per child, then exit 1."""
    parent = workers.start("--processes", "2", "--tasks", "nothing_by_this_name")
    log = Log(parent)
    try:
        assert parent.wait(timeout=30) == 1
        messages = log.wait_for(lambda messages: any("cannot run" in m for m in messages))
        assert len(_started(messages)) == 2, "neither was started again"
        assert any("no task named nothing_by_this_name" in m for m in messages)
    finally:
        _kill_children(parent, log)
