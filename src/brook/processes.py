"""Child processes, supervised: started again when they die, and never outliving their parent.

Two users: `brook worker --processes P` runs P copies of one worker command under a
`ProcessSupervisor`; the broker starts its delivery workers on demand from its event
loop (delivery/workers.py) with `spawn` and the same `Backoff`.

- **Restarts.** A child that dies is logged with its pid and how it ended (its exit
  status, or the name of the signal that killed it: an OOM kill reads "was killed by
  SIGKILL") and started again after a pause (`Backoff`, pure): `child_restart_ms_min`,
  doubling per quick death in a row (a child that lived less than `child_stable_ms`) up
  to `child_restart_ms_max`. A child that lived longer starts the count again.
- **Giving up.** A child that dies young `child_quick_deaths_max` times in a row will
  not start (a bad install, a module that fails to import): the supervisor stops the
  others and exits 1 with a one-line reason (logged), rather than loop for ever. A child that
  exits with `EXIT_NO_RESTART` said itself that starting again cannot help (bad
  settings, the broker unreachable past `--connect-timeout`): the same, at once.
- **Stopping.** SIGTERM and SIGINT are passed on to every child (which drain); from
  then on nothing is started again, and the supervisor exits once they all have: 0
  when each exited 0 (or was killed by the very signal passed on, as one still starting
  is: systemd counts that clean too), otherwise the worst status (128 + N for a child
  killed by signal N). The children run in sessions of their own, so a Ctrl-C in a terminal reaches
  them once, through the supervisor, not twice.
- **Dying with the parent.** A child `spawn` started finds its parent's pid in its
  environment (`BROOK_PARENT_PID`) and calls `die_with_parent()` first thing, which
  asks Linux to kill it (SIGKILL) when its parent ends (`prctl(PR_SET_PDEATHSIG)`), then
  checks that the parent is still the one that started it (it may have died before
  the call: then the child kills itself). The kernel sends that signal however the
  parent ends, kill -9 included; the child needs no thread or descriptor to watch, and
  a child busy in C code or stopped dies all the same, which a pipe it reads cannot
  promise. The child asks for it itself, not a `preexec_fn` of the parent, because code
  run between fork and exec is unsafe in a parent with threads (the broker has many).
  The signal is bound to the *thread* that started the child: start children from a
  thread that lives as long as they should (the main thread, the delivery loop's).
  Where there is no such signal (not Linux), a thread of the child looks at its
  parent's pid every `child_parent_check_ms`.
"""

from __future__ import annotations

import ctypes
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from brook import limits
from brook.retry import doubling, retry_delay

log = logging.getLogger("brook.processes")

PARENT_PID_ENV = "BROOK_PARENT_PID"
"""Set by `spawn` in the child's environment: the pid its `die_with_parent` expects."""
EXIT_NO_RESTART = 78
"""A child's exit status for a failure that starting it again cannot mend (EX_CONFIG in
sysexits.h): its supervisor stops the others and gives up."""
_PR_SET_PDEATHSIG = 1
"""prctl(2)'s option (linux/prctl.h)."""
_STOPPING = (signal.SIGTERM, signal.SIGINT)


# ---------------------------------------------------------------- restarts (pure)


@dataclass(frozen=True)
class Backoff:
    """When a child that died is started again: pure, the times are passed in."""

    min_ms: int = limits.child_restart_ms_min
    max_ms: int = limits.child_restart_ms_max
    stable_ms: int = limits.child_stable_ms
    quick_deaths_max: int = limits.child_quick_deaths_max

    def quick_deaths(self, before: int, lived_s: float) -> int:
        """Quick deaths in a row once a child that lived `lived_s` died, `before` of them
        before its own: one more if it died young, none if it had lived a while."""
        return before + 1 if lived_s * 1000 < self.stable_ms else 0

    def delay_s(self, quick_deaths: int) -> float:
        """Seconds to wait before starting a child again after `quick_deaths` in a row
        (0 or 1: the least pause; then doubling, up to `max_ms`)."""
        return retry_delay(doubling(self.min_ms, self.max_ms), quick_deaths) / 1000

    def gives_up(self, quick_deaths: int) -> bool:
        """Whether a child that died young this many times in a row is left dead."""
        return quick_deaths >= self.quick_deaths_max


def describe_exit(returncode: int) -> str:
    """How a child ended, for a log line: "exited with status 3", "was killed by SIGKILL"."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"was killed by {name}"


def exit_status(returncode: int) -> int:
    """A child's end as a process exit status, as a shell counts it (128 + N for signal N)."""
    return returncode if returncode >= 0 else 128 - returncode


# ---------------------------------------------------------------- dying with the parent


def spawn(
    command: Sequence[str],
    *,
    pass_fds: Sequence[int] = (),
    stdin: int | None = None,
    start_new_session: bool = False,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start `command` as a child that dies with this process, provided it calls
    `die_with_parent()` as it starts (brook's own children do). Raises OSError when
    it cannot be started. Call it from a thread that lives as long as the child should."""
    environment = dict(os.environ if env is None else env)
    environment[PARENT_PID_ENV] = str(os.getpid())
    return subprocess.Popen(
        list(command),
        env=environment,
        pass_fds=tuple(pass_fds),
        stdin=stdin,
        start_new_session=start_new_session,
    )


def die_with_parent() -> bool:
    """In a child `spawn` started, first thing: from now on the child is killed (SIGKILL)
    when its parent ends, however it ends; if the parent is gone already, now. Returns
    whether this process was started so (False: nothing done, as when run by hand).
    The variable is taken out of the environment, so that this process's own children
    are not taken for spawn's, and a second call does nothing."""
    expected = os.environ.pop(PARENT_PID_ENV, "")
    if not expected.isdigit():
        return False
    parent = int(expected)
    if not _parent_death_signal(signal.SIGKILL):
        _watch_parent(parent)
    if os.getppid() != parent:  # it ended before the signal was asked for
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def _parent_death_signal(signum: int) -> bool:
    """Ask Linux to send `signum` to this process when its parent ends; False where
    that cannot be asked."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter runs on
    return bool(libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0)


def _watch_parent(parent: int) -> None:
    """Without a parent-death signal: a thread that kills this process once its parent
    is no longer `parent` (an orphan is given another)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(limits.child_parent_check_ms / 1000)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="brook-parent-watch", daemon=True).start()


# ---------------------------------------------------------------- the supervisor


@dataclass
class _Slot:
    """One of the N children: the process now in it, and its history of deaths."""

    number: int
    process: subprocess.Popen[bytes] | None = None
    started_s: float = 0.0
    quick_deaths: int = 0
    start_at_s: float | None = None
    """When to start its next child (None: none to start)."""
    status: int | None = None
    """Its exit status once it is over for good (drained, or given up)."""
    last_status: int = 1
    """How its last child ended (an exit status), should it not be started again."""


class ProcessSupervisor:
    """`count` copies of `command`, kept running until SIGTERM or SIGINT (see the module).

    `name` names a child in the log ("worker 1234 was killed by SIGKILL; starting
    another in 0.5 s")."""

    def __init__(
        self,
        command: Sequence[str] | Sequence[Sequence[str]],
        count: int,
        *,
        name: str = "worker",
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`command`: one for every child, or one per child (a list of `count`)."""
        assert count >= 1, count
        if command and not isinstance(command[0], str):
            self.commands = [list(c) for c in command]
            assert len(self.commands) == count, (len(self.commands), count)
        else:
            self.commands = [[str(part) for part in command]] * count
        self.name = name
        self.backoff = backoff or Backoff()
        self.clock = clock
        self.reason: str | None = None
        """Why it gave up, once it has (also logged)."""
        self._slots = [_Slot(n) for n in range(count)]
        self._draining = False
        self._forwarded: set[int] = set()

    def run(self) -> int:
        """Start the children and look after them until each is over; on the main thread
        (it takes SIGTERM, SIGINT and SIGCHLD for that time). Returns the exit status:
        0 when every child exited 0 after a forwarded signal, else the worst status; 1
        when it gave up."""
        with _signals() as wait:
            for slot in self._slots:
                self._start(slot)
            while any(slot.status is None for slot in self._slots):
                for signum in wait(self._next_start_in_s()):
                    if signum in _STOPPING:
                        self._stop(signal.Signals(signum))
                self._collect()
                self._start_due()
        if self.reason is not None:
            return 1  # the reason is the news, not how the others took being stopped
        return max(slot.status or 0 for slot in self._slots)

    # ------------------------------------------------------------ inside

    def _start(self, slot: _Slot) -> None:
        slot.start_at_s = None
        slot.started_s = self.clock()
        try:
            # Sessions of their own: a Ctrl-C reaches them once, from here.
            slot.process = spawn(self.commands[slot.number], start_new_session=True)
        except OSError as exc:
            self._died(slot, f"could not be started ({exc.strerror or exc})")
            return
        log.info("%s %d started", self.name, slot.process.pid)

    def _collect(self) -> None:
        """Deal with each child that ended since the last look."""
        for slot in self._slots:
            process = slot.process
            if process is None or process.poll() is None:
                continue
            slot.process = None
            code = process.returncode
            if self._draining:
                # Killed by the signal passed on (it had no handler yet, still starting):
                # stopped as asked, held nothing. systemd counts it clean likewise.
                slot.status = 0 if -code in self._forwarded else exit_status(code)
                level = logging.INFO if code == 0 else logging.WARNING
                log.log(level, "%s %d %s", self.name, process.pid, describe_exit(code))
            elif code == EXIT_NO_RESTART:
                slot.status = 1
                self._give_up(f"{self.name} {process.pid} cannot run (see its error above)")
            else:
                slot.last_status = exit_status(code)
                self._died(slot, f"{process.pid} {describe_exit(code)}")

    def _died(self, slot: _Slot, what: str) -> None:
        """The child of `slot` is gone (`what` says how): start another after a pause,
        or give up."""
        slot.quick_deaths = self.backoff.quick_deaths(
            slot.quick_deaths, self.clock() - slot.started_s
        )
        if self.backoff.gives_up(slot.quick_deaths):
            slot.status = 1
            self._give_up(
                f"{self.name} processes keep dying as they start "
                f"({slot.quick_deaths} in a row; the last: {what}); giving up"
            )
            return
        delay_s = self.backoff.delay_s(slot.quick_deaths)
        slot.start_at_s = self.clock() + delay_s
        log.warning("%s %s; starting another in %.1f s", self.name, what, delay_s)

    def _give_up(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            log.error("%s", reason)
        self._stop(signal.SIGTERM, why="stopping the other")

    def _stop(self, signum: signal.Signals, why: str = "") -> None:
        """Pass `signum` on to every child; start none again. `why` says who stops them
        (a signal received, by default)."""
        if not self._draining:
            self._draining = True
            if why:
                log.info("%s %ss (%s), which drain", why, self.name, signum.name)
            else:
                log.info("%s: passed on to the %ss, which drain", signum.name, self.name)
        self._forwarded.add(signum)
        for slot in self._slots:
            if slot.process is not None:
                if slot.process.poll() is None:
                    slot.process.send_signal(signum)
            elif slot.status is None:  # dead, waiting to start again: it stays dead
                slot.start_at_s = None
                slot.status = slot.last_status

    def _next_start_in_s(self) -> float | None:
        due = [slot.start_at_s for slot in self._slots if slot.start_at_s is not None]
        return None if not due else max(0.0, min(due) - self.clock())

    def _start_due(self) -> None:
        now = self.clock()
        for slot in self._slots:
            if slot.start_at_s is not None and slot.start_at_s <= now and not self._draining:
                self._start(slot)


@contextmanager
def _signals() -> Iterator[Callable[[float | None], list[int]]]:
    """While open, SIGTERM, SIGINT and SIGCHLD wake a wait instead of acting: yields
    `wait(timeout_s)`, which returns the signals that arrived (perhaps none, at the
    timeout). Handlers and the wake-up descriptor are put back on leaving."""
    reader, writer = os.pipe()
    os.set_blocking(reader, False)
    os.set_blocking(writer, False)
    selector = selectors.DefaultSelector()
    selector.register(reader, selectors.EVENT_READ)
    caught = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)

    def ignore(_signum: int, _frame: FrameType | None) -> None:
        """Python's handler runs, the signal's number reaches the pipe: that is all."""

    before = {signum: signal.signal(signum, ignore) for signum in caught}
    previous_fd = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)

    def wait(timeout_s: float | None) -> list[int]:
        selector.select(timeout_s)
        try:
            return list(os.read(reader, 4096))
        except BlockingIOError:
            return []

    try:
        yield wait
    finally:
        signal.set_wakeup_fd(previous_fd)
        for signum, handler in before.items():
            signal.signal(signum, handler)
        selector.close()
        os.close(reader)
        os.close(writer)
