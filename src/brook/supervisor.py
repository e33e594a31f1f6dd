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

A step that raises `Closed` ends its loop quietly: the broker is closing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from brook import limits
from brook.clock import Clock
from brook.errors import BrookError, Closed

log = logging.getLogger("brook")


def retry_after_s(failures: int) -> float:
    """Seconds to wait after the `failures`-th failure in a row (1, 2, ...)."""
    delay_ms: int = limits.background_retry_ms_min * 2 ** min(max(failures, 1) - 1, 30)
    return min(delay_ms, limits.background_retry_ms_max) / 1000


@dataclass
class Failure:
    """A loop (or one task of it) that is failing now."""

    loop: str
    task: str | None
    error: str
    since_ms: int
    count: int
    """Failures in a row."""


class Supervisor:
    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self._mutex = threading.Lock()
        self._errors: dict[str, int] = {}
        self._failing: dict[tuple[str, str | None], Failure] = {}

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
