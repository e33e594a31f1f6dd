"""Every background loop of a broker, supervised, so none can die silently.

A loop is a *step* run again and again on its own thread; the step returns how
long to wait before the next one. When a step raises, the supervisor:

- logs it (with its traceback unless it is one of Brook's expected errors, such
  as storage being unavailable);
- counts it per loop (`brook_background_errors_total{loop=...}` in /metrics);
- reports the loop as failing (`/v1/health` answers 503 naming it) until a later
  step of the same loop succeeds;
- runs the step again after a back-off that doubles per failure
  (`background_retry_ms_min` up to `background_retry_ms_max`).

Work that is not a loop of its own (each task of maintenance) runs under
`guard`, which does the same for one task and keeps the error from reaching
its caller, so one failing topic cannot stop the work for the others.

Work done for one tenant's thing (an endpoint, a queue group) runs under
`isolate`: its error is that subject's alone. It is logged (once per new
error), counted, and shown as the subject failing (`isolated()`: an endpoint's
stats, the dashboard, /metrics, the detail of /v1/health) until the same work
next succeeds; it never reaches the loop, which goes on for every other
subject, and it never turns /v1/health to 503 (the broker serves).

A step that raises `Closed` ends its loop quietly: the broker is closing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator

from brook import limits
from brook.clock import Clock
from brook.errors import BrookError, Closed
from brook.models import Failure
from brook.retry import doubling, retry_delay

log = logging.getLogger("brook")


_BACKGROUND = doubling(limits.background_retry_ms_min, limits.background_retry_ms_max)


def retry_after_s(failures: int) -> float:
    """Seconds to wait after the `failures`-th failure in a row (1, 2, ...)."""
    return retry_delay(_BACKGROUND, failures) / 1000


class Supervisor:
    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self._mutex = threading.Lock()
        self._errors: dict[str, int] = {}
        self._failing: dict[tuple[str, str | None], Failure] = {}
        self._isolated: dict[tuple[str, str], Failure] = {}

    # ------------------------------------------------------------ loops

    def start(
        self,
        loop: str,
        step: Callable[[], float],
        stop: threading.Event,
        wait: Callable[[float], object] | None = None,
    ) -> threading.Thread:
        """Run `step` on a new thread `brook-<loop>` until `stop` is set; after each
        step wait the seconds it returned with `wait` (by default `stop.wait`; a
        service passes its own to be woken early). Returns the started thread."""
        pause = wait or stop.wait

        def run() -> None:
            while not stop.is_set():
                try:
                    with self._recording(loop, None, reraise=True):
                        seconds = step()
                except Closed:
                    return
                except Exception:
                    seconds = retry_after_s(self._failures(loop, None))
                if seconds > 0 and not stop.is_set():
                    pause(seconds)

        thread = threading.Thread(target=run, name=f"brook-{loop}", daemon=True)
        thread.start()
        return thread

    @contextlib.contextmanager
    def guard(self, loop: str, task: str | None = None) -> Iterator[None]:
        """Run one task of `loop`: an error is logged, counted and reported as
        failing (until the same task next succeeds), and not raised."""
        with self._recording(loop, task, reraise=False):
            yield

    @contextlib.contextmanager
    def isolate(self, loop: str, subject: str, task: str) -> Iterator[None]:
        """Run `task` of `loop` for `subject` alone: an error is the subject's (logged,
        counted, shown by `isolated()` until the task next succeeds for it) and is
        not raised, so the loop goes on with the others. `Closed` is raised."""
        try:
            yield
        except Closed:
            raise
        except Exception as exc:
            self.subject_failed(loop, subject, task, exc)
        else:
            self.subject_succeeded(subject, task)

    def subject_failed(self, loop: str, subject: str, task: str, exc: BaseException) -> None:
        """Record a failure of `task` done for `subject` (the caller handled it)."""
        error = _describe(exc)
        with self._mutex:
            self._errors[loop] = self._errors.get(loop, 0) + 1
            known = self._isolated.get((subject, task))
            if known is None:
                self._isolated[(subject, task)] = Failure(
                    loop, task, error, self.clock.now_ms(), 1, subject
                )
            else:
                known.count += 1
            changed = known is None or known.error != error
            if known is not None:
                known.error = error
        if not changed:
            return  # said already: a failing subject retried often must not flood the log
        if isinstance(exc, BrookError):
            log.warning("%s: %s failed: %s; the others go on", subject, task, exc)
        else:
            log.error("%s: %s failed unexpectedly; the others go on", subject, task, exc_info=exc)

    def subject_succeeded(self, subject: str, task: str) -> None:
        """`task` worked for `subject`: that failure is over."""
        if not self._isolated:
            return
        with self._mutex:
            gone = self._isolated.pop((subject, task), None)
        if gone is not None:
            log.info("%s: %s works again after %d failures", subject, task, gone.count)

    def forget_subject(self, subject: str) -> None:
        """The subject is gone (an endpoint or group deleted): its failures with it."""
        with self._mutex:
            for key in [k for k in self._isolated if k[0] == subject]:
                del self._isolated[key]

    def isolated(self, subjects: Callable[[str], bool] | None = None) -> list[Failure]:
        """Failures of single subjects now (those `subjects` accepts), oldest first."""
        with self._mutex:
            found = [f for (s, _), f in self._isolated.items() if subjects is None or subjects(s)]
        return sorted(found, key=lambda f: f.since_ms)

    # ------------------------------------------------------------ reporting

    def failed(self, loop: str, exc: BaseException, task: str | None = None) -> None:
        """Record a failure that the caller handled itself (the committer's)."""
        where = loop if task is None else f"{loop} ({task})"
        if isinstance(exc, BrookError):
            log.warning("%s failed: %s; trying again", where, exc)
        else:
            log.error("%s failed unexpectedly; trying again", where, exc_info=exc)
        with self._mutex:
            self._errors[loop] = self._errors.get(loop, 0) + 1
            known = self._failing.get((loop, task))
            if known is None:
                self._failing[(loop, task)] = Failure(
                    loop, task, _describe(exc), self.clock.now_ms(), 1
                )
            else:
                known.error = _describe(exc)
                known.count += 1

    def succeeded(self, loop: str, task: str | None = None) -> None:
        """The loop (or task) worked: it is no longer failing."""
        if not self._failing:  # the usual case, without taking the lock
            return
        with self._mutex:
            gone = self._failing.pop((loop, task), None)
        if gone is not None:
            where = loop if task is None else f"{loop} ({task})"
            log.info("%s works again after %d failures", where, gone.count)

    def failing(self) -> list[Failure]:
        """What is failing now, oldest first."""
        with self._mutex:
            return sorted(self._failing.values(), key=lambda f: f.since_ms)

    def errors(self) -> dict[str, int]:
        """Errors counted per loop since the broker opened."""
        with self._mutex:
            return dict(self._errors)

    # ------------------------------------------------------------ inside

    def _failures(self, loop: str, task: str | None) -> int:
        with self._mutex:
            known = self._failing.get((loop, task))
        return 1 if known is None else known.count

    @contextlib.contextmanager
    def _recording(self, loop: str, task: str | None, reraise: bool) -> Iterator[None]:
        try:
            yield
        except Closed:
            raise
        except Exception as exc:
            self.failed(loop, exc, task)
            if reraise:
                raise
        else:
            self.succeeded(loop, task)


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if not isinstance(exc, BrookError):
        text = f"{type(exc).__name__}: {text}"
    return text[:500]
