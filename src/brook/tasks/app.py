"""`brook.App`: tasks as plain Python functions, their jobs on Brook's queues.

Each task has a topic (`tasks.<name>`, or the `queue=` given) and one queue group
on it (`tasks`) whose settings are the task's: attempts, backoff, per-key
concurrency and rate limits. `task.enqueue(...)` appends one record (payload.py)
and returns a `JobRef` naming it; `app.job(ref)` asks the group where it stands.
The same code runs against a directory, S3 or memory (embedded: the broker runs in
this process) or a `brook serve` URL (remote): only the location differs.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

import msgspec

from brook import limits, names, scheduling
from brook.api import BrokerApi, QueueApi
from brook.errors import BadRequest, NotFound
from brook.models import Backoff, Record
from brook.tasks import payload

GROUP = "tasks"
"""The queue group every task's jobs are leased through."""
TOPIC_PREFIX = "tasks."
SCHEDULE_PREFIX = "task."
"""A periodic task's schedule is named this and the task's name."""

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
    `JobRef.parse` reads it back (to keep in a database, or pass in a URL)."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    @classmethod
    def parse(cls, text: str) -> JobRef:
        topic, _, rest = str(text).partition("/")
        partition, _, offset = rest.partition("/")
        if not (names.NAME.fullmatch(topic) and partition.isdigit() and offset.isdigit()):
            raise BadRequest(f"{text!r} is not a job reference (topic/partition/offset)")
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
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.topic = topic
        self.settings = settings
        """The queue group's settings this task asks for (None: keep the stored ones)."""
        self.timeout_ms = timeout_ms
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<Task {self.name} on {self.topic}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def enqueue(
        self,
        *args: Any,
        key: str | bytes | None = None,
        priority: int | None = None,
        delay_ms: int | None = None,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> JobRef:
        """A job of this call, durable when this returns: its reference. Arguments
        are JSON values; jobs of one `key` share the task's per-key limits and are
        served fairly against other keys; a higher `priority` goes ahead of lower
        ones; `delay_ms` holds it back from now; an `idempotency_key` seen within the
        broker's window returns the first job's reference and enqueues nothing."""
        value = payload.encode_call(self.name, args, kwargs)
        headers = {payload.TASK_HEADER: self.name.encode(), "content-type": b"application/json"}
        headers.update(scheduling.headers(priority=priority, delay_ms=delay_ms))
        key_bytes = key.encode() if isinstance(key, str) else key
        ack = self.app.queue_of(self).topic_handle.append(
            value, key=key_bytes, headers=headers, idempotency_key=idempotency_key
        )
        return JobRef(self.topic, ack.partition, ack.offset)

    def enqueue_many(self, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[JobRef]:
        """Jobs of many calls ((args, kwargs) each) in one durable batch."""
        headers = {payload.TASK_HEADER: self.name.encode(), "content-type": b"application/json"}
        records = [
            Record(payload.encode_call(self.name, args, kwargs), headers=headers)
            for args, kwargs in calls
        ]
        acks = self.app.queue_of(self).topic_handle.append_many(records)
        return [JobRef(self.topic, ack.partition, ack.offset) for ack in acks]


class _Bound:
    """A task's queue group and topic on the app's broker, its settings stored once."""

    def __init__(self, broker: BrokerApi, task: Task[Any, Any]) -> None:
        self.queue: QueueApi = broker.queue(task.topic, GROUP, **task.settings)
        self.topic_handle = broker.topic(task.topic)


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
        self._bound: dict[str, _Bound] = {}
        self._mutex = threading.Lock()

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

    def queue_of(self, task: Task[Any, Any]) -> _Bound:
        bound = self._bound.get(task.name)
        if bound is None:
            bound = _Bound(self.broker, task)
            with self._mutex:
                self._bound.setdefault(task.name, bound)
        return bound

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
    ) -> Any:
        """Register `fn` as a task (use as `@app.task` or `@app.task(...)`).

        `name` defaults to the function's name; its jobs go to topic `queue`
        (default `tasks.<name>`). `max_attempts`, `backoff`, `concurrency_per_key`
        (jobs of one key running at once), `rate_limit_per_s` (jobs started a second,
        all keys together) and `key_rate_limit_per_s` (per key) are its queue
        group's settings; `timeout_ms` bounds one run (an async task is cancelled, a
        sync one abandoned: its attempt fails either way)."""

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
            settings = {
                "max_attempts": max_attempts,
                "backoff": backoff,
                "concurrency_per_key": concurrency_per_key,
                "rate_limit_per_s": rate_limit_per_s,
                "key_rate_limit_per_s": key_rate_limit_per_s,
                "visibility_timeout_ms": visibility_timeout_ms,
            }
            task = Task(self, function, task_name, topic, settings, timeout_ms)
            self.tasks[task_name] = task
            return task

        return register(fn) if fn is not None else register

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

    def sync_schedules(self, tasks: list[str] | None = None) -> list[str]:
        """Store the periodic tasks' schedules in the broker (each named
        `task.<name>`), replacing what changed; their names."""
        stored = []
        for task_name, timing in sorted(self.periodic_jobs.items()):
            if tasks is not None and task_name not in tasks:
                continue
            task = self.tasks[task_name]
            self.queue_of(task)  # the queue group and its settings first
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

    def job(self, ref: JobRef | str) -> JobStatus:
        """Where the job stands: state, attempts, last error, its result."""
        if not isinstance(ref, JobRef):
            ref = JobRef.parse(ref)
        try:
            info = self.broker.queue(ref.topic, GROUP, create=False).job(ref.partition, ref.offset)
        except NotFound:  # no such topic or group: no such job
            return JobStatus(ref=ref, state="unknown", attempts=0, error="")
        return JobStatus(
            ref=ref,
            state=info.state,
            attempts=info.attempt,
            error=info.error,
            result=payload.decode_result(info.result),
            finished_ms=info.acked_ms,
            due_ms=info.due_ms,
        )

    def close(self) -> None:
        with self._mutex:
            broker, self._broker = self._broker, None
            self._bound.clear()
        if broker is not None:
            broker.close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
