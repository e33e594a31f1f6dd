"""How a task's call becomes a job's record, and the checks made on the way: the
function's signature, its settings, the headers a record carries. Pure."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from brook import names, scheduling
from brook.errors import BadRequest
from brook.models import Record
from brook.queue import settings as queue_settings
from brook.tasks import payload

if TYPE_CHECKING:
    from brook.tasks.task import Task

    pass
from brook.tasks.refs import OPTIONS, EnqueueOptions

log = logging.getLogger("brook.tasks")


def left(deadline: float | None) -> float | None:
    """The seconds left before `deadline` (time.monotonic()), or None for none."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def signature_of(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins and C functions have none
        return None


def plain_signature(signature: inspect.Signature) -> str:
    """`(order, amount=0)`: the parameters a call must fit, without annotations."""
    empty = inspect.Parameter.empty
    parameters = [p.replace(annotation=empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=parameters, return_annotation=empty))


def check_task_name(name: Any) -> None:
    if not isinstance(name, str) or not names.NAME.fullmatch(name):
        raise BadRequest(f"{name!r} is not a task name (A-Z a-z 0-9 . _ -)")


def check_no_option_parameters(task: Task[Any, Any]) -> None:
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


def check_settings(task_name: str, topic: str, settings: dict[str, Any]) -> None:
    """Settings the broker would refuse are refused at declaration, not in the worker."""
    try:
        queue_settings.merge(topic, None, **settings)
    except BadRequest as exc:
        raise ValueError(f"task {task_name}: {exc}") from None


def normalized(setting: str, value: Any) -> Any:
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


def same_call(stored: bytes, sent: bytes) -> bool:
    """Whether two record values hold the same call (keyword order aside; 1 and 1.0
    and True differ, as they would arrive)."""
    if stored == sent:
        return True
    try:
        first, second = payload.decode_call(stored), payload.decode_call(sent)
    except ValueError:
        return False
    return _canonical(first) == _canonical(second)


_canonical = msgspec.json.Encoder(order="sorted").encode
