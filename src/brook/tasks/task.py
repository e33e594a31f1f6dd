"""`Task`: a plain function registered with `@app.task`, still a function when called,
whose `.enqueue` appends a job; and `Options`, a task with enqueue options bound."""

from __future__ import annotations

import asyncio
import datetime
import difflib
import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

import msgspec

from brook.errors import BadRequest
from brook.tasks import uniqueness
from brook.tasks.canvas import Signature

if TYPE_CHECKING:
    from brook.tasks.app import App

    pass
from brook.tasks.calls import job_records, plain_signature, signature_of
from brook.tasks.refs import NO_OPTIONS, OPTIONS, EnqueueOptions, JobRef

log = logging.getLogger("brook.tasks")


ISOLATIONS = ("thread", "process")


SETTINGS = (
    "max_attempts",
    "backoff",
    "concurrency_per_key",
    "rate_limit_per_s",
    "key_rate_limit_per_s",
    "visibility_timeout_ms",
)
"""The queue group settings a task may declare."""


P = ParamSpec("P")


R = TypeVar("R")


class Task(Generic[P, R]):
    """A function registered with an app. Calling it still just calls it;
    `enqueue` makes a job of the call for a worker to run."""

    def __init__(
        self,
        app: App,
        fn: Callable[P, R],
        name: str,
        topic: str,
        settings: dict[str, Any],
        timeout_ms: int | None,
        *,
        isolation: str = "thread",
        options_only: bool = False,
        unique_by: uniqueness.UniqueBy = None,
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.topic = topic
        self.settings = settings
        """The queue group's settings this task asks for (None: keep the stored ones)."""
        self.timeout_ms = timeout_ms
        self.isolation = isolation
        """"thread" (the worker's pool or event loop) or "process" (a child process,
        killed at timeout_ms)."""
        self.options_only = options_only
        """Whether `enqueue` passes every keyword to the function (options only
        through `options(...)`)."""
        self.unique_by = unique_by
        """None (not unique), True (the whole call), parameter names, or a function:
        what makes two of its jobs one (tasks/uniqueness.py)."""
        self.is_async = inspect.iscoroutinefunction(fn)
        self.signature = signature_of(fn)
        """The function's signature, each call bound to it at enqueue (None: it has
        none Python can tell, and calls are not checked)."""
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<Task {self.name} on {self.topic}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def options(
        self,
        *,
        key: str | bytes | None = None,
        priority: int | None = None,
        delay_ms: int | None = None,
        idempotency_key: str | None = None,
        eta: datetime.datetime | None = None,
        debounce_ms: int | None = None,
    ) -> Options[P, R]:
        """This task with enqueue options, whose `enqueue(*args, **kwargs)` passes every
        argument to the function: `charge.options(key="customer-7").enqueue("o-1",
        amount=100)`. Raises BadRequest for an option out of its bounds."""
        given = EnqueueOptions(
            key=key,
            priority=priority,
            delay_ms=delay_ms,
            idempotency_key=idempotency_key,
            eta=eta,
            debounce_ms=debounce_ms,
        )
        return Options(self, given.checked())

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """This call as a signature, not made yet (brook.chain, group, chord): in a
        canvas it takes the result before it as its first argument. Every keyword is
        the function's; options with `.options(...)`."""
        return Signature(self.app, self.name, self.topic, args, kwargs, NO_OPTIONS)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """`s`, immutable: in a canvas it takes no result from the job before it."""
        return Signature(self.app, self.name, self.topic, args, kwargs, NO_OPTIONS, True)

    def enqueue(self, *args: Any, **kwargs: Any) -> JobRef:
        """A job of this call, durable when this returns: its reference.

        The keywords `key`, `priority`, `delay_ms`, `eta` and `idempotency_key` are enqueue
        options (as in `options(...)`), the rest the function's; a task declared
        `options_only=True` passes every keyword to the function. Raises BadRequest
        when an argument is not a plain JSON value or the call does not fit the
        function's signature, Conflict when the idempotency key was used for other
        arguments within the broker's window (the same arguments return the first
        job's reference and enqueue nothing)."""
        return self.app._enqueue(self, args, kwargs, self._options_from(kwargs))

    def _options_from(self, kwargs: dict[str, Any]) -> EnqueueOptions:
        """The enqueue options among `kwargs` (taken out of it), unless options_only."""
        if self.options_only:
            return NO_OPTIONS
        given = {name: kwargs.pop(name) for name in OPTIONS if name in kwargs}
        return EnqueueOptions(**given).checked() if given else NO_OPTIONS

    def enqueue_many(self, calls: Sequence[tuple[Sequence[Any], dict[str, Any]]]) -> list[JobRef]:
        """Jobs of many calls ((args, kwargs) each, every keyword the function's) in one
        durable batch, with no options (`options(...).enqueue_many` gives them)."""
        return self.app._enqueue_many(self, calls, NO_OPTIONS)

    async def enqueue_async(self, *args: Any, **kwargs: Any) -> JobRef:
        """`enqueue`, as a coroutine: the event loop is free while the job's record
        is made durable. The same keywords, checks and errors."""
        return await self.app._enqueue_async(self, args, kwargs, self._options_from(kwargs))

    async def enqueue_many_async(
        self, calls: Sequence[tuple[Sequence[Any], dict[str, Any]]]
    ) -> list[JobRef]:
        """`enqueue_many`, as a coroutine."""
        if self.unique_by is not None:
            return await asyncio.to_thread(self.app._enqueue_many, self, calls, NO_OPTIONS)
        return await self.app._async.append_many(self.topic, job_records(self, calls, NO_OPTIONS))

    def on_start(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`@task.on_start`: as `app.on_start`, for this task's jobs only."""
        return self._hook("on_start", fn)

    def on_success(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`@task.on_success`: as `app.on_success`, for this task's jobs only."""
        return self._hook("on_success", fn)

    def on_retry(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`@task.on_retry`: as `app.on_retry`, for this task's jobs only."""
        return self._hook("on_retry", fn)

    def on_failure(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`@task.on_failure`: as `app.on_failure`, for this task's jobs only."""
        return self._hook("on_failure", fn)

    def _hook(self, point: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        self.app.hooks.add(point, fn, self.name)
        return fn

    def check_call(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """Raise BadRequest unless the function can be called so (a missing or an
        unexpected argument): at enqueue, not in the worker later."""
        if self.signature is None:
            return
        parameters = self.signature.parameters
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            for name in kwargs:
                if name not in parameters:  # said first: a misspelling, not what it left out
                    close = difflib.get_close_matches(name, list(parameters), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise BadRequest(
                        f"task {self.name}{plain_signature(self.signature)} has no "
                        f"parameter {name!r}{hint}"
                    )
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise BadRequest(
                f"task {self.name}{plain_signature(self.signature)} cannot take this call: {exc}"
            ) from None


class Options(Generic[P, R]):
    """A task with enqueue options (`task.options(...)`): every argument of its
    `enqueue` goes to the function."""

    def __init__(self, task: Task[P, R], options: EnqueueOptions) -> None:
        self.task = task
        self.given = options

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self.given, name)!r}"
            for name in OPTIONS
            if getattr(self.given, name) is not None
        )
        return f"<Task {self.task.name} with {shown or 'no options'}>"

    def options(self, **changes: Any) -> Options[P, R]:
        """These options with `changes` (the same keywords as `Task.options`)."""
        unknown = sorted(set(changes) - set(OPTIONS))
        if unknown:
            raise TypeError(f"options() takes {', '.join(OPTIONS)}, not {', '.join(unknown)}")
        return Options(self.task, msgspec.structs.replace(self.given, **changes).checked())

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobRef:
        """As `Task.enqueue`, with these options; every keyword is the function's."""
        return self.task.app._enqueue(self.task, args, kwargs, self.given)

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """As `Task.s`, with these options."""
        task = self.task
        return Signature(task.app, task.name, task.topic, args, kwargs, self.given)

    def si(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """As `Task.si`, with these options."""
        task = self.task
        return Signature(task.app, task.name, task.topic, args, kwargs, self.given, True)

    def enqueue_many(self, calls: Sequence[tuple[Sequence[Any], dict[str, Any]]]) -> list[JobRef]:
        """As `Task.enqueue_many`, each job with these options. An idempotency key
        names one job: BadRequest here."""
        return self.task.app._enqueue_many(self.task, calls, self.given)

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> JobRef:
        """As `Task.enqueue_async`, with these options."""
        return await self.task.app._enqueue_async(self.task, args, kwargs, self.given)

    async def enqueue_many_async(
        self, calls: Sequence[tuple[Sequence[Any], dict[str, Any]]]
    ) -> list[JobRef]:
        """As `Task.enqueue_many_async`, each job with these options."""
        task = self.task
        if task.unique_by is not None or self.given.debounce_ms is not None:
            return await asyncio.to_thread(task.app._enqueue_many, task, calls, self.given)
        return await task.app._async.append_many(task.topic, job_records(task, calls, self.given))
