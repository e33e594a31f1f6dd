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
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from brook import limits, names, validate
from brook.api import BrokerApi, QueueApi, TopicApi
from brook.errors import BadRequest, Conflict, DataLoss, NotFound
from brook.models import Backoff, Record
from brook.tasks import canvas, payload, results, revocations, uniqueness
from brook.tasks.asynchronous import AsyncSide
from brook.tasks.calls import (
    check_no_option_parameters,
    check_settings,
    check_task_name,
    job_record,
    job_records,
    left,
    normalized,
    same_call,
)
from brook.tasks.canvas import GroupRef, Signature
from brook.tasks.hooks import Hooks
from brook.tasks.refs import (
    GROUP,
    NO_OPTIONS,
    SCHEDULE_PREFIX,
    TOPIC_PREFIX,
    EnqueueOptions,
    JobRef,
    JobStatus,
)
from brook.tasks.task import ISOLATIONS, SETTINGS, P, R, Task

if TYPE_CHECKING:
    from brook.tasks.testing import Testing

log = logging.getLogger("brook.tasks")


class App:
    """Tasks and the broker their jobs go through.

    `location` is what `brook.open` takes (a directory, `s3://...`, `memory://`: the
    broker runs in this process, and only one process may own a location) or the
    URL of a `brook serve` (`http://...`: any number of producers and workers), with
    `api_key`, or the environment's BROOK_API_KEY when none is given. Nothing is opened
    until the first enqueue, job lookup or worker."""

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
                    # (BROOK_API_KEY, as every command takes it: a worker's unit file
                    # gives the key so, never its code)
                    key = self.api_key or os.environ.get("BROOK_API_KEY") or None
                    self._broker = brook.connect(self.location, api_key=key)
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
            check_settings(task_name, topic, settings)
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
                check_no_option_parameters(task)
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
                if normalized(setting, mine) != normalized(setting, theirs):
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
        check_task_name(name)
        return Signature(self, name, self._topic_of(name), args, kwargs, NO_OPTIONS)

    def signature_from(self, given: dict[str, Any]) -> Signature:
        """A signature from its JSON form (`Signature.to_dict()`)."""
        return canvas.signature_from(self, given)

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
        check_task_name(name)
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
        if first.key != key or not same_call(first.value, value):
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
                name: (stored.get(name), normalized(name, value))
                for name, value in declared.items()
                if normalized(name, value) != normalized(name, stored.get(name))
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
            return [self.result(r, left(deadline)) for r in ref.refs]
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
            return [await self.result_async(r, left(deadline)) for r in ref.refs]
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
        check_task_name(name)
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
