"""The process supervisor (brook/processes.py) with real processes: a tiny supervisor
script over tiny children, killed, drained, failing at start, and killed itself."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from brook.processes import EXIT_NO_RESTART, PARENT_PID_ENV, Backoff, describe_exit, exit_status
from tests.environment import unmeasured
from tests.served import SRC

SUPERVISOR = """
import json, sys
from brook import logs
from brook.processes import Backoff, ProcessSupervisor
logs.setup("info")
count, backoff, child = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
supervisor = ProcessSupervisor([sys.executable, "-c", child], count, backoff=Backoff(**backoff))
sys.exit(supervisor.run())
"""

CHILD = """
import json, os, signal, sys
from brook.processes import die_with_parent

def say(msg):
    sys.stderr.write(json.dumps({{"msg": msg, "child": os.getpid()}}) + "\\n")
    sys.stderr.flush()

def drain(signum, frame):
    say("drained")
    sys.exit({drained_status})

die_with_parent()
signal.signal(signal.SIGTERM, drain)
signal.signal(signal.SIGINT, drain)
say("ready")
while True:
    signal.pause()
"""

FAST = {"min_ms": 100, "max_ms": 400, "stable_ms": 5_000, "quick_deaths_max": 3}


def child(drained_status: int = 0) -> str:
    return CHILD.format(drained_status=drained_status)


class Supervised:
    """A supervisor process and what it and its children write to stderr (JSON lines)."""

    def __init__(self, count: int, child_code: str, backoff: dict[str, int]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SUPERVISOR, str(count), json.dumps(backoff), child_code],
            env={**unmeasured(), "PYTHONPATH": SRC},
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"msg": line.rstrip()}
            with self._changed:
                self.lines.append(entry)
                self._changed.notify_all()
        with self._changed:
            self.lines.append({"msg": "<end of output>"})
            self._changed.notify_all()

    def wait_for(
        self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 20.0
    ) -> list[dict[str, Any]]:
        with self._changed:
            if not self._changed.wait_for(lambda: done(self.lines), timeout):
                raise AssertionError(f"not within {timeout} s; the log: {self.lines[-8:]}")
            return list(self.lines)

    def ready(self, count: int) -> list[int]:
        """Wait until `count` children (in all) said they are ready; their pids."""
        lines = self.wait_for(lambda lines: len(_said(lines, "ready")) >= count)
        return _said(lines, "ready")

    def children(self) -> set[int]:
        with self._changed:
            return set(_said(self.lines, "ready"))

    def stop(self) -> None:
        """Kill whatever is left of it, by pid."""
        for pid in [self.process.pid, *self.children()]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.process.wait()
        self._reader.join(10)
        assert self.process.stderr is not None
        self.process.stderr.close()


def _said(lines: list[dict[str, Any]], msg: str) -> list[int]:
    return [int(line["child"]) for line in lines if line.get("msg") == msg]


def _messages(lines: list[dict[str, Any]]) -> list[str]:
    return [str(line.get("msg")) for line in lines]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone
    except FileNotFoundError:
        return False


def _gone_within(pid: int, timeout: float) -> bool:
    """Whether process `pid` (any, not only a child of this one) ends within `timeout`:
    waits on its pidfd, which is readable once it has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable) or not _alive(pid)
    finally:
        os.close(fd)


@pytest.fixture
def supervise() -> Iterator[Callable[..., Supervised]]:
    started: list[Supervised] = []

    def start(count: int, child_code: str, backoff: dict[str, int] = FAST) -> Supervised:
        supervised = Supervised(count, child_code, backoff)
        started.append(supervised)
        return supervised

    yield start
    for supervised in started:
        supervised.stop()


# ---------------------------------------------------------------- pure


def test_the_pause_doubles_while_children_die_young_and_is_bounded() -> None:
    backoff = Backoff(min_ms=500, max_ms=4_000, stable_ms=10_000, quick_deaths_max=5)
    assert [backoff.delay_s(n) for n in range(7)] == [0.5, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert backoff.delay_s(10_000) == 4.0
    quick = 0
    for _ in range(4):
        quick = backoff.quick_deaths(quick, lived_s=0.2)
    assert quick == 4 and not backoff.gives_up(quick)
    assert backoff.gives_up(backoff.quick_deaths(quick, lived_s=9.9))
    assert backoff.quick_deaths(quick, lived_s=10.0) == 0, "a child that lived starts it again"


def test_how_a_child_ended_reads_as_a_shell_would_say_it() -> None:
    assert describe_exit(3) == "exited with status 3"
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"
    assert (exit_status(0), exit_status(3), exit_status(-signal.SIGKILL)) == (0, 3, 137)


# ---------------------------------------------------------------- dying with the parent


def test_a_child_whose_parent_is_gone_already_kills_itself() -> None:
    code = "from brook.processes import die_with_parent; print(die_with_parent())"
    environment = {**unmeasured(), "PYTHONPATH": SRC}
    alone = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True)
    assert alone.stdout == b"False\n", "run by hand: nothing done"
    # Its parent is this test, not pid 1: as if the parent that spawned it had died.
    orphan = subprocess.run(
        [sys.executable, "-c", code], env={**environment, PARENT_PID_ENV: "1"}, capture_output=True
    )
    assert (orphan.returncode, orphan.stdout) == (-signal.SIGKILL, b"")


def test_the_children_die_with_a_supervisor_killed_with_sigkill(
    supervise: Callable[..., Supervised],
) -> None:
    supervised = supervise(2, child())
    children = supervised.ready(2)
    os.kill(supervised.process.pid, signal.SIGKILL)
    assert supervised.process.wait(10) == -signal.SIGKILL
    for pid in children:
        assert _gone_within(pid, 2.0), f"child {pid} outlived its supervisor"


# ---------------------------------------------------------------- the supervisor


def test_a_child_killed_with_sigkill_is_started_again_and_the_restart_logged(
    supervise: Callable[..., Supervised],
) -> None:
    supervised = supervise(2, child())
    first, second = supervised.ready(2)
    os.kill(first, signal.SIGKILL)
    supervised.ready(3)  # a third child, in place of the first
    lines = supervised.wait_for(lambda lines: True)
    assert f"worker {first} was killed by SIGKILL; starting another in 0.1 s" in _messages(lines)
    assert not _alive(first) and _alive(second)
    os.kill(supervised.process.pid, signal.SIGTERM)
    assert supervised.process.wait(20) == 0, "the replacement and the other drained"
    lines = supervised.wait_for(lambda lines: "<end of output>" in _messages(lines))
    assert sorted(_said(lines, "drained")) == sorted(set(supervised.children()) - {first})


def test_sigterm_is_passed_on_and_the_supervisor_exits_0_once_they_drained(
    supervise: Callable[..., Supervised],
) -> None:
    supervised = supervise(3, child())
    children = supervised.ready(3)
    os.kill(supervised.process.pid, signal.SIGTERM)
    assert supervised.process.wait(20) == 0
    lines = supervised.wait_for(lambda lines: "<end of output>" in _messages(lines))
    assert sorted(_said(lines, "drained")) == sorted(children)
    assert len(_said(lines, "ready")) == 3, "nothing was started after SIGTERM"
    assert not any(_alive(pid) for pid in children)


def test_a_child_killed_by_the_signal_passed_on_counts_as_stopped(
    supervise: Callable[..., Supervised],
) -> None:
    """As a worker still starting (no handler yet) is: it held nothing."""
    plain = child().replace("signal.signal(signal.SIGTERM, drain)", "")
    supervised = supervise(2, plain)
    children = supervised.ready(2)
    os.kill(supervised.process.pid, signal.SIGTERM)
    assert supervised.process.wait(20) == 0
    assert not any(_alive(pid) for pid in children)


def test_a_child_that_ends_badly_as_it_drains_sets_the_exit_status(
    supervise: Callable[..., Supervised],
) -> None:
    supervised = supervise(2, child(drained_status=3))
    supervised.ready(2)
    os.kill(supervised.process.pid, signal.SIGINT)
    assert supervised.process.wait(20) == 3


def test_a_child_that_keeps_dying_as_it_starts_makes_it_give_up(
    supervise: Callable[..., Supervised],
) -> None:
    supervised = supervise(2, "import sys; sys.exit(4)")
    assert supervised.process.wait(20) == 1
    lines = supervised.wait_for(lambda lines: "<end of output>" in _messages(lines))
    reasons = [m for m in _messages(lines) if "giving up" in m]
    assert len(reasons) == 1, _messages(lines)
    assert reasons[0].startswith("worker processes keep dying as they start (3 in a row")
    assert "exited with status 4" in reasons[0]
    restarts = [m for m in _messages(lines) if "exited with status 4; starting another" in m]
    assert 2 <= len(restarts) <= 5, "each death but the last is logged with its pause"


def test_a_child_that_says_it_cannot_run_makes_it_give_up_at_once(
    supervise: Callable[..., Supervised],
) -> None:
    failing = f"import sys; sys.exit({EXIT_NO_RESTART})"
    started = time.monotonic()
    supervised = supervise(1, failing, {**FAST, "min_ms": 5_000})
    assert supervised.process.wait(20) == 1
    assert time.monotonic() - started < 5.0, "it did not wait to start it again"
    lines = supervised.wait_for(lambda lines: "<end of output>" in _messages(lines))
    assert any("cannot run" in m for m in _messages(lines))
