"""`brook.App`: tasks as plain Python functions, their jobs on Brook's queues.

Each task has a topic (`tasks.<name>`, or the `queue=` given) and one queue group
on it (`tasks`), shared by every task on that topic. Enqueueing only appends: one
record (payload.py) whose arguments are plain JSON values (arguments.py), checked
against the function's signature, and returns a `JobRef` naming it. The group and its
settings (attempts, backoff, per-key concurrency, rate limits) belong to the worker:
it claims the queue (`claim_queue`) and writes what its tasks declare, so a service
that only enqueues (`send_task`, or a declaration of its own) never changes them.
`app.job(ref)` asks the group where a job stands. The same code runs against a
directory, S3 or memory (embedded: the broker runs in this process) or a `brook
serve` URL (remote): only the location differs.
"""

from __future__ import annotations

import asyncio
import datetime
import difflib
import functools
import inspect
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

import msgspec

from brook import limits, names, scheduling, validate
from brook.api import BrokerApi, QueueApi, TopicApi
from brook.errors import BadRequest, Conflict, DataLoss, NotFound
from brook.models import Backoff, Record
from brook.queue import settings as queue_settings
from brook.tasks import canvas, payload, results, revocations, uniqueness
from brook.tasks.asynchronous import AsyncSide
from brook.tasks.canvas import GroupRef, Signature
from brook.tasks.hooks import Hooks

if TYPE_CHECKING:
    from brook.tasks.testing import Testing

log = logging.getLogger("brook.tasks")

GROUP = "tasks"
"""The queue group every task's jobs are leased through."""
TOPIC_PREFIX = "tasks."
SCHEDULE_PREFIX = "task."
"""A periodic task's schedule is named this and the task's name."""
OPTIONS = ("key", "priority", "delay_ms", "eta", "idempotency_key", "debounce_ms")
"""Enqueue options: `task.enqueue` takes them as keywords, so no parameter may be
named so (unless the task is declared options_only)."""
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


class Retry(Exception):
    """Raise in a task to have it run again after `delay_ms` (default: the task's
    backoff); it counts as an attempt."""

    def __init__(self, reason: str = "", delay_ms: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay_ms = delay_ms


class Discard(Exception):
    """Raise in a task to give its job up at once: dead, with `reason`, no more attempts."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class JobRef(msgspec.Struct, frozen=True):
    """Names one job: its record. `str(ref)` is `topic/partition/offset`, and
    `JobRef.parse` reads it back (to keep in a database, or pass in a URL).

    A job a canvas enqueues later (a chain's link, a chord's callback) is named by
    the broker join that will append it (`join`; partition and offset are -1 until
    then): `topic/after/<join>`. `app.result`, `app.job` and `app.revoke` take either."""

    topic: str
    partition: int
    offset: int
    join: str | None = None
    existing: bool = False
    """From `enqueue` of a unique task: True when a live job of the same identity was
    there already and nothing was enqueued (this is that job). Not part of equality."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobRef) and (
            (self.topic, self.partition, self.offset, self.join)
            == (other.topic, other.partition, other.offset, other.join)
        )

    def __hash__(self) -> int:
        return hash((self.topic, self.partition, self.offset, self.join))

    def __str__(self) -> str:
        if self.join is not None:
            return f"{self.topic}/after/{self.join}"
        return f"{self.topic}/{self.partition}/{self.offset}"

    @classmethod
    def parse(cls, text: str) -> JobRef:
        topic, _, rest = str(text).partition("/")
        partition, _, offset = rest.partition("/")
        if names.NAME.fullmatch(topic) and partition == "after" and names.ID.fullmatch(offset):
            return cls(topic, -1, -1, offset)
        whole = "0|[1-9][0-9]{0,18}"  # ASCII digits only, no leading zero: one spelling a job
        if not (
            names.NAME.fullmatch(topic)
            and re.fullmatch(whole, partition, re.ASCII)
            and re.fullmatch(whole, offset, re.ASCII)
            and int(partition) <= limits.whole_max
            and int(offset) <= limits.whole_max
        ):
            raise BadRequest(
                f"{text!r} is not a job reference (topic/partition/offset, or topic/after/join)"
            )
        return cls(topic, int(partition), int(offset))


class JobStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Where a job stands (`app.job(ref)`): its queue state (brook.JobInfo's states:
    pending, ready, delayed, leased, retrying, acked, dead, unknown), attempts so far,
    why the last one failed, and what it returned (decoded JSON) while kept."""

    ref: JobRef
    state: str
    attempts: int
    error: str
    result: Any = None
    finished_ms: int | None = None
    due_ms: int | None = None

    @property
    def done(self) -> bool:
        """Finished for good: acked or dead."""
        return self.state in ("acked", "dead")


class EnqueueOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How a job is enqueued, apart from its call: its record key (per-key limits and
    fairness act on it), priority, delay from now, and idempotency key."""

    key: str | bytes | None = None
    priority: int | None = None
    delay_ms: int | None = None
    idempotency_key: str | None = None
    eta: datetime.datetime | None = None
    """Not before this time (timezone-aware); with delay_ms too, the later one holds."""
    debounce_ms: int | None = None
    """Keep only the last of a burst: a waiting job of the same identity is cancelled
    and this one runs `debounce_ms` from now (unless enqueued again before then)."""

    def checked(self) -> EnqueueOptions:
        """Itself; raises BadRequest naming the option that is not what it must be."""
        if self.key is not None and not isinstance(self.key, str | bytes):
            raise BadRequest(f"key must be a str or bytes, not {type(self.key).__name__}")
        if self.idempotency_key is not None and not isinstance(self.idempotency_key, str):
            raise BadRequest(
                f"idempotency_key must be a str, not {type(self.idempotency_key).__name__}"
            )
        for name in ("priority", "delay_ms", "debounce_ms"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise BadRequest(f"{name} must be an int, not {type(value).__name__}")
        if self.eta is not None:
            if not isinstance(self.eta, datetime.datetime):
                raise BadRequest(f"eta must be a datetime, not {type(self.eta).__name__}")
            if self.eta.utcoffset() is None:
                raise BadRequest(
                    "eta must be timezone-aware (a naive datetime names no moment): "
                    "datetime.now(timezone.utc) + timedelta(...), or .astimezone()"
                )
        scheduling.headers(  # their bounds
            priority=self.priority, delay_ms=self.delay_ms, not_before=self.not_before_ms
        )
        if self.debounce_ms is not None:
            if not 1 <= self.debounce_ms <= limits.timer_horizon_ms_max:
                raise BadRequest(f"debounce_ms must be from 1 to {limits.timer_horizon_ms_max}")
            if self.idempotency_key is not None:
                raise BadRequest("give debounce_ms or idempotency_key, not both")
        return self

    @property
    def not_before_ms(self) -> int | None:
        return None if self.eta is None else int(self.eta.timestamp() * 1000)


NO_OPTIONS = EnqueueOptions()


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
        self.signature = _signature(fn)
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
                        f"task {self.name}{_plain_signature(self.signature)} has no "
                        f"parameter {name!r}{hint}"
                    )
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise BadRequest(
                f"task {self.name}{_plain_signature(self.signature)} cannot take this call: {exc}"
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


class App:
    """Tasks and the broker their jobs go through.

    `location` is what `brook.open` takes (a directory, `s3://...`, `memory://`: the
    broker runs in this process, and only one process may own a location) or the
    URL of a `brook serve` (`http://...`: any number of producers and workers).
    Nothing is opened until the first enqueue, job lookup or worker."""

    def __init__(
        self, location: str = "./brook-data", *, api_key: str | None = None, **options: Any
    ) -> None:
        self.location = str(location)
        self.api_key = api_key
        self.options = options
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.periodic_jobs: dict[str, Any] = {}
        self._broker: BrokerApi | None = None
        self._topics: dict[str, TopicApi] = {}
        self._queues: dict[str, QueueApi] = {}
        self._claimed: set[str] = set()
        self._mutex = threading.Lock()
        self.hooks = Hooks()
        """What the workers call at points of a job's life (tasks/hooks.py)."""

    def __repr__(self) -> str:
        return f"<brook.App {self.location} tasks={sorted(self.tasks)}>"

    @property
    def remote(self) -> bool:
        return self.location.startswith(("http://", "https://"))

    @property
    def broker(self) -> BrokerApi:
        """The broker, opened (or connected) on first use."""
        with self._mutex:
            if self._broker is None:
                import brook

                if self.remote:
                    self._broker = brook.connect(self.location, api_key=self.api_key)
                else:
                    self._broker = brook.open(self.location, **self.options)
            return self._broker

    # ------------------------------------------------------------ declaring

    def task(
        self,
        fn: Callable[P, R] | None = None,
        *,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | dict[str, Any] | None = None,
        concurrency_per_key: int | None = None,
        rate_limit_per_s: float | None = None,
        key_rate_limit_per_s: float | None = None,
        timeout_ms: int | None = None,
        visibility_timeout_ms: int | None = None,
        isolation: str = "thread",
        options_only: bool = False,
        unique: bool = False,
        unique_by: Sequence[str] | Callable[..., Any] | None = None,
    ) -> Any:
        """Register `fn` as a task (use as `@app.task` or `@app.task(...)`).

        `name` defaults to the function's name; its jobs go to topic `queue`
        (default `tasks.<name>`; tasks sharing a queue share its group, so their
        settings must agree). `max_attempts`, `backoff`, `concurrency_per_key` (jobs of
        one key running at once), `rate_limit_per_s` (jobs started a second, all keys
        together), `key_rate_limit_per_s` (per key) and `visibility_timeout_ms` are the
        group's settings, written by the worker that runs the task. `timeout_ms`
        bounds one run; `isolation="process"` runs each job in a child process, killed
        at that bound. A parameter named like an enqueue option (key, priority,
        delay_ms, eta, idempotency_key) needs `options_only=True`: `enqueue` then passes
        every keyword to the function, and options go through `task.options(...)`.
        `unique=True` (or `unique_by=` parameter names, or a function of the arguments
        giving a string): while a job of the same identity is waiting, delayed or
        running, `enqueue` returns that job's reference (`ref.existing` is True) and
        enqueues nothing (tasks/uniqueness.py).
        Raises ValueError for a declaration that cannot work, saying what to do."""

        def register(function: Callable[P, R]) -> Task[P, R]:
            task_name = name or function.__name__
            if not names.NAME.fullmatch(task_name) or task_name.startswith("__"):
                raise ValueError(
                    f"task name {task_name!r} is not a valid name (A-Z a-z 0-9 . _ -): give name="
                )
            if task_name in self.tasks:
                raise ValueError(f"two tasks are named {task_name!r}: give one a name=")
            topic = queue or TOPIC_PREFIX + task_name
            if not names.NAME.fullmatch(topic) or topic.startswith("__"):
                raise ValueError(f"queue {topic!r} is not a valid topic name")
            if timeout_ms is not None and not 0 < timeout_ms <= limits.visibility_timeout_ms_max:
                raise ValueError(f"timeout_ms must be from 1 to {limits.visibility_timeout_ms_max}")
            if isolation not in ISOLATIONS:
                raise ValueError(
                    f'task {task_name}: isolation must be "thread" or "process", not {isolation!r}'
                )
            settings = {
                "max_attempts": max_attempts,
                "backoff": backoff,
                "concurrency_per_key": concurrency_per_key,
                "rate_limit_per_s": rate_limit_per_s,
                "key_rate_limit_per_s": key_rate_limit_per_s,
                "visibility_timeout_ms": visibility_timeout_ms,
            }
            _check_settings(task_name, topic, settings)
            task = Task(
                self,
                function,
                task_name,
                topic,
                settings,
                timeout_ms,
                isolation=isolation,
                options_only=bool(options_only),
                unique_by=uniqueness.check_declared(task_name, bool(unique), unique_by, function),
            )
            if not task.options_only:
                _check_no_option_parameters(task)
            self._check_shared_settings(task)
            self.tasks[task_name] = task
            return task

        return register(fn) if fn is not None else register

    def _check_shared_settings(self, task: Task[Any, Any]) -> None:
        """Tasks on one topic share its group: a setting two of them declare must agree."""
        for other in self.tasks.values():
            if other.topic != task.topic:
                continue
            for setting in SETTINGS:
                mine, theirs = task.settings[setting], other.settings[setting]
                if mine is None or theirs is None:
                    continue
                if _normalized(setting, mine) != _normalized(setting, theirs):
                    raise ValueError(
                        f"tasks {other.name} and {task.name} share queue {task.topic} (one "
                        f"queue group, one set of settings) but declare {setting}={theirs!r} "
                        f"and {setting}={mine!r}: give both the same value, declare it on "
                        "one of them only, or give one a queue= of its own"
                    )

    def periodic(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        cron: str | None = None,
        every_ms: int | None = None,
        tz: str = "UTC",
        missed: str = "skip",
        name: str | None = None,
        **task_options: Any,
    ) -> Any:
        """Register `fn` as a task that runs once per slot of `cron` (five fields, in
        time zone `tz`) or of `every_ms`, called with no arguments. The schedule is
        stored in the broker (`brook.schedules`) when a worker starts (or on
        `sync_schedules()`), so one job per slot is enqueued however many workers
        run, across restarts and take-overs; `missed` says what a slot the broker
        was down over gets ("skip" it, or "run_once")."""
        if (cron is None) == (every_ms is None):
            raise ValueError("give cron= or every_ms= (one of them)")

        def register(function: Callable[..., Any]) -> Task[Any, Any]:
            task: Task[Any, Any] = self.task(function, name=name, **task_options)
            self.periodic_jobs[task.name] = {
                "cron": cron,
                "every_ms": every_ms,
                "tz": tz,
                "missed": missed,
            }
            return task

        return register(fn) if fn is not None else register

    # ------------------------------------------------------------ enqueueing

    # ------------------------------------------------------------ hooks

    def on_start(self, fn: Any = None, *, task: Task[Any, Any] | str | None = None) -> Any:
        """`@app.on_start`: call `fn(job)` before each run (of `task`'s jobs only, when
        given). tasks/hooks.py says when each hook runs; a hook that raises is logged
        and changes no job's outcome."""
        return self._hook("on_start", fn, task)

    def on_success(self, fn: Any = None, *, task: Task[Any, Any] | str | None = None) -> Any:
        """`@app.on_success`: call `fn(job, result)` once a job's ack is durable."""
        return self._hook("on_success", fn, task)

    def on_retry(self, fn: Any = None, *, task: Task[Any, Any] | str | None = None) -> Any:
        """`@app.on_retry`: call `fn(job, error)` once a failed attempt's nack is
        durable and another attempt follows."""
        return self._hook("on_retry", fn, task)

    def on_failure(self, fn: Any = None, *, task: Task[Any, Any] | str | None = None) -> Any:
        """`@app.on_failure`: call `fn(job, error)` once a job is dead (its last
        attempt failed, or it raised Discard)."""
        return self._hook("on_failure", fn, task)

    def on_worker_start(self, fn: Any = None) -> Any:
        """`@app.on_worker_start`: call `fn()` once in each worker process (and each
        child of process-isolated tasks) before its first job: open pools here."""
        return self._hook("on_worker_start", fn, None)

    def _hook(self, point: str, fn: Any, task: Task[Any, Any] | str | None) -> Any:
        name = task.name if isinstance(task, Task) else task
        if name is not None and not isinstance(name, str):
            raise TypeError(f"task= is a task or its name, not {type(task).__name__}")

        def register(hook: Callable[..., Any]) -> Callable[..., Any]:
            self.hooks.add(point, hook, name)
            return hook

        return register if fn is None else register(fn)

    def signature(self, name: str, *args: Any, **kwargs: Any) -> Signature:
        """A signature of task `name` by its name, for a task this process does not
        import (as `send_task`): on this app's queue of it if declared here, else
        `tasks.<name>`. Every keyword is the function's; a task on another queue:
        `signature_from({"task": name, "queue": ..., "args": [...]})`."""
        _check_task_name(name)
        return Signature(self, name, self._topic_of(name), args, kwargs, NO_OPTIONS)

    def signature_from(self, given: dict[str, Any]) -> Signature:
        """A signature from its JSON form (`Signature.to_dict()`)."""
        if not isinstance(given, dict) or not isinstance(given.get("task"), str):
            raise BadRequest('a signature is a dict with "task", "args", "kwargs", "options"')
        name = given["task"]
        _check_task_name(name)
        topic = given.get("queue") or self._topic_of(name)
        if not isinstance(topic, str) or not names.NAME.fullmatch(topic):
            raise BadRequest(f"queue {topic!r} is not a valid topic name")
        args, kwargs = given.get("args") or [], given.get("kwargs") or {}
        if not isinstance(args, list | tuple) or not isinstance(kwargs, dict):
            raise BadRequest("a signature's args is a list and its kwargs a dict")
        opts = dict(given.get("options") or {})
        if isinstance(opts.get("eta"), str):
            try:
                opts["eta"] = datetime.datetime.fromisoformat(opts["eta"])
            except ValueError:
                raise BadRequest(f"eta {opts['eta']!r} is not an ISO 8601 time") from None
        sig = Signature(self, name, topic, args, kwargs, NO_OPTIONS, bool(given.get("immutable")))
        return sig.options(**opts) if opts else sig

    def _signature_record(self, sig: Signature, passing: str) -> Record:
        """The record of a signature's job, as a join appends it (`passing`: how it
        takes the results before it), its call checked against what it will get."""
        args = canvas.placeholders(passing) + sig.args
        declared = self.tasks.get(sig.task)
        if declared is not None:
            declared.check_call(args, sig.kwargs)
        record = job_record(sig.task, sig.args, sig.kwargs, sig.opts)
        if sig.opts.idempotency_key is not None:
            raise BadRequest(
                f"{sig!r}: a job a join enqueues is enqueued once already; it takes no "
                "idempotency_key"
            )
        return canvas.continuation_headers(record, passing)

    def _check_signature(self, sig: Signature) -> None:
        """A signature's call checked as its enqueue would check it (BadRequest)."""
        declared = self.tasks.get(sig.task)
        if declared is not None:
            declared.check_call(sig.args, sig.kwargs)
        job_record(sig.task, sig.args, sig.kwargs, sig.opts)  # JSON arguments

    def _append_signature(self, sig: Signature) -> JobRef:
        declared = self.tasks.get(sig.task)
        if declared is not None and declared.topic == sig.topic:
            return self._enqueue(declared, sig.args, sig.kwargs, sig.opts)
        return self._append(sig.topic, sig.task, sig.args, sig.kwargs, sig.opts)

    def _append_signatures(self, topic: str, sigs: list[Signature]) -> list[tuple[int, int]]:
        """Append the first jobs of a canvas on `topic`, in order: their positions."""
        if any(sig.opts.idempotency_key is not None for sig in sigs):
            refs = [self._append_signature(sig) for sig in sigs]
            return [(ref.partition, ref.offset) for ref in refs]
        records = []
        for sig in sigs:
            declared = self.tasks.get(sig.task)
            if declared is not None:
                declared.check_call(sig.args, sig.kwargs)
            records.append(job_record(sig.task, sig.args, sig.kwargs, sig.opts))
        acks = self._topic(topic).append_many(records)
        return [(ack.partition, ack.offset) for ack in acks]

    def send_task(
        self,
        name: str,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        queue: str | None = None,
        key: str | bytes | None = None,
        priority: int | None = None,
        delay_ms: int | None = None,
        idempotency_key: str | None = None,
        eta: datetime.datetime | None = None,
    ) -> JobRef:
        """Enqueue a job of task `name` by its name, for a worker elsewhere to run (the
        function need not be here): its reference, durable. Its topic is
        `tasks.<name>` unless `queue` is given; nothing but the record is written (no
        queue group, no settings). The arguments are checked as `enqueue` checks them;
        when this app declares the task, against its signature and on its queue too.
        Raises BadRequest, or Conflict for an idempotency key used for other arguments."""
        _check_task_name(name)
        if isinstance(args, str | bytes) or not isinstance(args, Sequence):
            raise BadRequest("args is the list (or tuple) of the positional arguments")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise BadRequest("kwargs is the dict of the keyword arguments")
        options = EnqueueOptions(
            key=key, priority=priority, delay_ms=delay_ms, idempotency_key=idempotency_key, eta=eta
        ).checked()
        declared = self.tasks.get(name)
        if declared is not None:
            if queue is not None and queue != declared.topic:
                raise BadRequest(
                    f"task {name} is declared on queue {declared.topic} in this app, not {queue}"
                )
            return self._enqueue(declared, tuple(args), dict(kwargs or {}), options)
        topic = queue or TOPIC_PREFIX + name
        if not names.NAME.fullmatch(topic) or topic.startswith("__"):
            raise BadRequest(f"queue {topic!r} is not a valid topic name")
        return self._append(topic, name, tuple(args), dict(kwargs or {}), options)

    def _enqueue(
        self,
        task: Task[Any, Any],
        args: Sequence[Any],
        kwargs: dict[str, Any],
        options: EnqueueOptions,
    ) -> JobRef:
        task.check_call(args, kwargs)
        if task.unique_by is not None or options.debounce_ms is not None:
            return self._append_unique(task, args, kwargs, options)
        return self._append(task.topic, task.name, args, kwargs, options)

    def _append_unique(
        self,
        task: Task[Any, Any],
        args: Sequence[Any],
        kwargs: dict[str, Any],
        options: EnqueueOptions,
    ) -> JobRef:
        """A unique or debounced job: the queue group appends it unless a live job of its
        identity is there (then that job's reference, `existing`), or, debounced,
        cancels the waiting one in its place (queue/unique.py)."""
        if options.idempotency_key is not None:
            raise BadRequest(
                f"task {task.name} is unique: its identity de-duplicates it; give no idempotency_key"
            )
        identity = uniqueness.identity(task, args, kwargs, options.key)
        replace = options.debounce_ms is not None
        if replace:
            options = msgspec.structs.replace(
                options, delay_ms=max(options.delay_ms or 0, options.debounce_ms or 0)
            )
        record = job_record(task.name, args, kwargs, options)
        ack = self.queue(task.topic).enqueue_unique(
            identity, record.value, record.key, record.headers, replace=replace
        )
        return JobRef(task.topic, ack.partition, ack.offset, existing=ack.existing)

    async def _enqueue_async(
        self,
        task: Task[Any, Any],
        args: Sequence[Any],
        kwargs: dict[str, Any],
        options: EnqueueOptions,
    ) -> JobRef:
        task.check_call(args, kwargs)
        if task.unique_by is not None or options.debounce_ms is not None:
            return await asyncio.to_thread(self._append_unique, task, args, kwargs, options)
        record = job_record(task.name, args, kwargs, options)
        return await self._async.append(task.topic, record, options)

    def _append(
        self,
        topic: str,
        task_name: str,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        options: EnqueueOptions,
    ) -> JobRef:
        """Append one job's record, the only write an enqueue makes."""
        return self._append_record(
            topic, job_record(task_name, args, kwargs, options), options.idempotency_key
        )

    def _append_record(self, topic: str, record: Record, idempotency_key: str | None) -> JobRef:
        ack = self._topic(topic).append(
            record.value, key=record.key, headers=record.headers, idempotency_key=idempotency_key
        )
        ref = JobRef(topic, ack.partition, ack.offset)
        if idempotency_key is not None:
            self._check_same_job(ref, record.value, record.key, idempotency_key)
        return ref

    def _enqueue_many(
        self,
        task: Task[Any, Any],
        calls: Sequence[tuple[Sequence[Any], dict[str, Any]]],
        options: EnqueueOptions,
    ) -> list[JobRef]:
        records = job_records(task, calls, options)
        if task.unique_by is not None or options.debounce_ms is not None:
            return [self._append_unique(task, args, kwargs, options) for args, kwargs in calls]
        acks = self._topic(task.topic).append_many(records)
        return [JobRef(task.topic, ack.partition, ack.offset) for ack in acks]

    def _check_same_job(
        self, ref: JobRef, value: bytes, key: bytes | None, idempotency_key: str
    ) -> None:
        """The broker answers a repeated idempotency key with the first record's ack,
        whatever the repeat held: compare that record with what was sent. Conflict
        when its call or key differ (Stripe's answer); accepted when it cannot be
        read any more (retention took it)."""
        try:
            records = self._topic(ref.topic).read(ref.partition, ref.offset, limit=1)
        except (NotFound, DataLoss):
            return
        first = next((r for r in records if r.offset == ref.offset), None)
        if first is None:
            return
        if first.key != key or not _same_call(first.value, value):
            raise Conflict(
                f"idempotency_key {idempotency_key!r} was already used for job {ref} with "
                "other arguments or another key: the same arguments return that job, "
                "other arguments need an idempotency_key of their own"
            )

    def _topic(self, topic: str) -> TopicApi:
        handle = self._topics.get(topic)
        if handle is None:
            handle = self._topics.setdefault(topic, self.broker.topic(topic))
        return handle

    # ------------------------------------------------------------ for the worker

    def queue_settings(self, topic: str) -> dict[str, Any]:
        """The queue group settings this app's tasks on `topic` declare (those given,
        merged over every task on the topic: they agree, `task` saw to it)."""
        declared: dict[str, Any] = {}
        for task in self.tasks.values():
            if task.topic == topic:
                declared.update((s, v) for s, v in task.settings.items() if v is not None)
        return declared

    def claim_queue(self, topic: str) -> tuple[QueueApi, dict[str, tuple[Any, Any]]]:
        """For a worker that runs tasks of `topic`: its queue group, opened (created
        if new), with the settings this app declares written where they differ from
        the stored ones; and what changed, `{setting: (stored, declared)}` (stored None
        when the group is new; values as the group shows them), each change logged. Idempotent: a second
        claim with the same declaration writes nothing."""
        declared = self.queue_settings(topic)
        try:
            queue = self.broker.queue(topic, GROUP, create=False)
        except NotFound:  # new: created with this app's settings
            queue = self.broker.queue(topic, GROUP, **declared)
            shown = queue.settings()
            changed = {name: (None, shown.get(name)) for name in declared}
        else:
            stored = queue.settings()
            changed = {
                name: (stored.get(name), _normalized(name, value))
                for name, value in declared.items()
                if _normalized(name, value) != _normalized(name, stored.get(name))
            }
            if changed:
                queue = self.broker.queue(
                    topic, GROUP, **{name: declared[name] for name in changed}
                )
        with self._mutex:
            self._queues[topic] = queue
            self._claimed.add(topic)
        for name, (before, written) in sorted(changed.items()):
            log.info("queue %s: %s set to %r (it was %r)", topic, name, written, before)
        return queue, changed

    def queue(self, topic: str) -> QueueApi:
        """The queue group of `topic`, opened without touching its settings (created
        with the stored or default ones if new): for a worker's leases and acks.
        Cached per topic."""
        queue = self._queues.get(topic)
        if queue is None:
            queue = self.broker.queue(topic, GROUP)
            with self._mutex:
                queue = self._queues.setdefault(topic, queue)
        return queue

    def sync_schedules(self, tasks: list[str] | None = None) -> list[str]:
        """Store the periodic tasks' schedules in the broker (each named
        `task.<name>`), replacing what changed; their names. A worker's step: it
        claims each schedule's queue first (writing its settings where they differ)."""
        stored = []
        for task_name, timing in sorted(self.periodic_jobs.items()):
            if tasks is not None and task_name not in tasks:
                continue
            task = self.tasks[task_name]
            if task.topic not in self._claimed:
                self.claim_queue(task.topic)
            schedule = SCHEDULE_PREFIX + task_name
            self.broker.put_schedule(
                schedule,
                task.topic,
                payload.encode_call(task_name, (), {}),
                headers={payload.TASK_HEADER: task_name.encode()},
                **timing,
            )
            stored.append(schedule)
        return stored

    # ------------------------------------------------------------ looking

    def job(self, ref: JobRef | str) -> JobStatus:
        """Where the job stands: state, attempts, last error, its result. A job on a
        queue no worker opened yet is `pending` (its record is there, no group took
        it); one whose record is not there either is `unknown`. Creates nothing."""
        if not isinstance(ref, JobRef):
            ref = JobRef.parse(ref)
        if ref.join is not None:
            try:
                now = results.placed(ref, self.broker.join(ref.join))
            except results.TaskFailed as failed:
                error = failed.error
                if failed.failed != str(ref):
                    error = f"job {failed.failed} before it failed: {error}"
                return JobStatus(ref=ref, state="dead", attempts=0, error=error)
            if now is None:
                return JobStatus(ref=ref, state=results.WAITING, attempts=0, error="")
            ref = now
        try:
            info = self.broker.queue(ref.topic, GROUP, create=False).job(ref.partition, ref.offset)
        except NotFound:  # no such topic or group yet
            return JobStatus(ref=ref, state=self._unqueued_state(ref), attempts=0, error="")
        return JobStatus(
            ref=ref,
            state=info.state,
            attempts=info.attempt,
            error=info.error,
            result=payload.decode_result(info.result),
            finished_ms=info.acked_ms,
            due_ms=info.due_ms,
        )

    def _unqueued_state(self, ref: JobRef) -> str:
        return "pending" if self._record_exists(ref) else "unknown"

    def _record_exists(self, ref: JobRef) -> bool:
        try:
            records = self.broker.topic(ref.topic).read(ref.partition, ref.offset, limit=1)
        except (NotFound, DataLoss):
            return False
        return any(r.offset == ref.offset for r in records)

    def result(self, ref: JobRef | GroupRef | str, timeout: float | None = None) -> Any:
        """What job `ref` returned, once it is acked (decoded JSON; None when it
        returned nothing or its result was not kept: docs/TASKS.md, Results). Waits by
        long-poll on the broker, answered as soon as the ack is durable, up to
        `timeout` seconds (None: as long as it takes). Raises `brook.TaskFailed` (with
        the job's error) when it ended dead, TimeoutError when it is not finished in
        time, NotFound when there is no such job. A GroupRef gives the list of its
        jobs' results (TaskFailed for the first dead one), all within `timeout`."""
        if timeout is not None:
            timeout = validate.seconds(timeout, "timeout")
        if isinstance(ref, GroupRef):
            deadline = None if timeout is None else time.monotonic() + timeout
            return [self.result(r, _left(deadline)) for r in ref.refs]
        if not isinstance(ref, JobRef):
            ref = JobRef.parse(ref)

        def queue_of(topic: str) -> QueueApi:
            return self.broker.queue(topic, GROUP, create=False)

        return results.wait(queue_of, ref, timeout, self._record_exists, self.broker.join)

    async def result_async(self, ref: JobRef | GroupRef | str, timeout: float | None = None) -> Any:
        """`result`, as a coroutine: the event loop is free while it waits."""
        if timeout is not None:
            timeout = validate.seconds(timeout, "timeout")
        if isinstance(ref, GroupRef):
            deadline = None if timeout is None else time.monotonic() + timeout
            return [await self.result_async(r, _left(deadline)) for r in ref.refs]
        if not isinstance(ref, JobRef):
            ref = JobRef.parse(ref)
        return await self._async.result(ref, timeout)

    @functools.cached_property
    def _async(self) -> AsyncSide:
        return AsyncSide(self)

    def revoke(
        self, ref: JobRef | GroupRef | str, reason: str = "revoked", *, terminate: bool = False
    ) -> bool:
        """Make sure job `ref` does not run: True if it was waiting (ready, delayed or
        retrying) and is now dead with `reason`, durably (redrive brings it back);
        False if it is running or finished (acked or dead), or unknown. A job not yet
        taken into its queue's window (behind a backlog of queue_window_records_max)
        is not reached: False, and it runs. With `terminate`, a running job is stopped
        too, by the worker running it, within about limits.revocation_poll_ms (an
        async task cancelled, a process-isolated one's child killed; a thread runs to
        its end) and settled dead with `reason` (tasks/revocations.py); still False.
        A canvas's job not enqueued yet (a chain's later link): False; revoke the job
        running before it, and the canvas fails there. A GroupRef revokes each of its
        jobs: True if every one was waiting."""
        if isinstance(ref, GroupRef):
            done = [self.revoke(r, reason, terminate=terminate) for r in ref.refs]
            return all(done)
        if not isinstance(ref, JobRef):
            ref = JobRef.parse(ref)
        if ref.join is not None:
            try:
                now = results.placed(ref, self.broker.join(ref.join))
            except results.TaskFailed:
                return False
            if now is None:
                return False
            ref = now
        cancelled = self.queue(ref.topic).cancel([(ref.partition, ref.offset)], reason=reason)
        if not cancelled and terminate and self.job(ref).state == "leased":
            revocations.send(self.broker, str(ref), reason)
        return bool(cancelled)

    def revoke_key(
        self, task: Task[Any, Any] | str, key: str | bytes, reason: str = "revoked"
    ) -> int:
        """Revoke every waiting job of `task` (its queue, when tasks share one: every
        task's) with record key `key`; how many. Running and finished ones are left."""
        topic = task.topic if isinstance(task, Task) else self._topic_of(task)
        return len(self.queue(topic).cancel(key=key, reason=reason))

    def _topic_of(self, name: str) -> str:
        declared = self.tasks.get(name)
        if declared is not None:
            return declared.topic
        _check_task_name(name)
        return TOPIC_PREFIX + name

    def testing(self) -> Testing:
        """`with app.testing() as t:` this app's tasks run in the calling thread on a
        fresh in-memory broker whose clock the test moves: `t.drain()` runs every job
        due (delays and backoffs fast-forwarded), `t.advance(seconds)` moves the
        clock. The app is as before once the block ends (tasks/testing.py)."""
        from brook.tasks.testing import Testing

        return Testing(self)

    async def aclose(self) -> None:
        """Close the async client of the running event loop (if `*_async` calls made
        one), then the rest as `close` does."""
        if "_async" in self.__dict__:
            await self._async.close()
        self.close()

    def close(self) -> None:
        with self._mutex:
            broker, self._broker = self._broker, None
            self._topics.clear()
            self._queues.clear()
            self._claimed.clear()
        if broker is not None:
            broker.close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _left(deadline: float | None) -> float | None:
    """The seconds left before `deadline` (time.monotonic()), or None for none."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins and C functions have none
        return None


def _plain_signature(signature: inspect.Signature) -> str:
    """`(order, amount=0)`: the parameters a call must fit, without annotations."""
    empty = inspect.Parameter.empty
    parameters = [p.replace(annotation=empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=parameters, return_annotation=empty))


def _check_task_name(name: Any) -> None:
    if not isinstance(name, str) or not names.NAME.fullmatch(name):
        raise BadRequest(f"{name!r} is not a task name (A-Z a-z 0-9 . _ -)")


def _check_no_option_parameters(task: Task[Any, Any]) -> None:
    """Refuse a function whose parameters `enqueue`'s options would swallow."""
    if task.signature is None:
        return
    for parameter in task.signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            shadowed = f"takes **{parameter.name}, which would receive key=, priority=, ..."
        elif parameter.name in OPTIONS and parameter.kind is not inspect.Parameter.POSITIONAL_ONLY:
            shadowed = f"has a parameter named {parameter.name!r}, an enqueue option"
        else:
            continue
        raise ValueError(
            f"task {task.name} {shadowed}: {task.name}.enqueue(...) could not tell its "
            f"arguments from its options. {'Rename the parameter' if 'named' in shadowed else 'Name its parameters'}, or declare "
            f"@app.task(options_only=True): then {task.name}.enqueue(...) passes every "
            f"keyword to the function and options go through "
            f"{task.name}.options(key=...).enqueue(...)"
        )


def _check_settings(task_name: str, topic: str, settings: dict[str, Any]) -> None:
    """Settings the broker would refuse are refused at declaration, not in the worker."""
    try:
        queue_settings.merge(topic, None, **settings)
    except BadRequest as exc:
        raise ValueError(f"task {task_name}: {exc}") from None


def _normalized(setting: str, value: Any) -> Any:
    """A setting as the group stores and shows it, to compare a declared value with a
    stored one: a backoff (a Backoff or a dict of some of its fields) as the full
    dict, a limit of 0 as None (no limit), rates as floats."""
    if value is None:
        return None
    if setting == "backoff":
        try:
            return msgspec.structs.asdict(queue_settings.backoff(value))
        except BadRequest:
            return value
    if setting == "concurrency_per_key":
        return int(value) or None
    if setting in ("rate_limit_per_s", "key_rate_limit_per_s"):
        return float(value) or None
    return value


def job_record(
    task_name: str, args: Sequence[Any], kwargs: dict[str, Any], options: EnqueueOptions
) -> Record:
    """The record of one job: its call, key and headers (the idempotency key apart)."""
    value = payload.encode_call(task_name, tuple(args), kwargs)
    key = options.key.encode() if isinstance(options.key, str) else options.key
    return Record(value, key=key, headers=_headers(task_name, options))


def job_records(
    task: Task[Any, Any],
    calls: Sequence[tuple[Sequence[Any], dict[str, Any]]],
    options: EnqueueOptions,
) -> list[Record]:
    """The records of many jobs of `task`, each call checked against its signature."""
    if options.idempotency_key is not None:
        raise BadRequest("an idempotency_key names one job: give it to enqueue, not enqueue_many")
    records = []
    for args, kwargs in calls:
        task.check_call(args, kwargs)
        records.append(job_record(task.name, args, kwargs, options))
    return records


def _headers(task_name: str, options: EnqueueOptions) -> dict[str, bytes]:
    headers = {payload.TASK_HEADER: task_name.encode(), "content-type": b"application/json"}
    headers.update(
        scheduling.headers(
            priority=options.priority, delay_ms=options.delay_ms, not_before=options.not_before_ms
        )
    )
    return headers


_canonical = msgspec.json.Encoder(order="sorted").encode


def _same_call(stored: bytes, sent: bytes) -> bool:
    """Whether two record values hold the same call (keyword order aside; 1 and 1.0
    and True differ, as they would arrive)."""
    if stored == sent:
        return True
    try:
        first, second = payload.decode_call(stored), payload.decode_call(sent)
    except ValueError:
        return False
    return _canonical(first) == _canonical(second)
