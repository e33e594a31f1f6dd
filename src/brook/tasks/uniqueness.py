"""Unique jobs and debounce: which jobs are "the same" (a job's identity).

`@app.task(unique=True)`: a job's identity is its task and its call (the arguments
bound to the function's parameters, defaults applied, so `f(1, y=2)` and `f(1, 2)` are
one). `unique_by=("customer",)`: the task and those arguments only. `unique_by=fn`:
the task and `fn(*args, **kwargs)` (a string). The identity sent to the broker is a
hash of that (64 hex digits), so any argument fits, and it is the queue group that
keeps one live job per identity (queue/unique.py), however many producers race.

A task with no `unique` declared still has an identity for `debounce_ms`: the job's
key when it has one (a burst per key), else its call.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from brook.errors import BadRequest

if TYPE_CHECKING:
    from brook.tasks.task import Task

UniqueBy = bool | Sequence[str] | Callable[..., Any] | None

_canonical = msgspec.json.Encoder(order="sorted").encode


def check_declared(
    task_name: str, unique: bool, unique_by: UniqueBy, fn: Callable[..., Any]
) -> UniqueBy:
    """What a declaration's `unique=` and `unique_by=` mean together (None: not unique);
    ValueError for one that cannot work."""
    if unique_by is None:
        return True if unique else None
    if isinstance(unique_by, str):
        unique_by = (unique_by,)
    if callable(unique_by):
        return unique_by
    if isinstance(unique_by, bool):
        raise ValueError(
            f"task {task_name}: unique_by is a tuple of parameter names, or a function"
        )
    names = tuple(unique_by)
    if not names or not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"task {task_name}: unique_by is a tuple of parameter names, or a function"
        )
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return names
    missing = [n for n in names if n not in parameters]
    if missing:
        raise ValueError(
            f"task {task_name}: unique_by names {missing[0]!r}, which is not one of its "
            f"parameters ({', '.join(parameters)})"
        )
    return names


def identity(
    task: Task[Any, Any], args: Sequence[Any], kwargs: dict[str, Any], key: str | bytes | None
) -> str:
    """The job's identity: a hash of the task's name and what makes its call unique. A
    task not declared unique (debounce_ms) is identified by the job's key when it has
    one (a burst per key), else by its whole call."""
    unique_by = task.unique_by
    if unique_by is None and key is not None:
        what: Any = ["key", key.decode(errors="replace") if isinstance(key, bytes) else key]
    elif callable(unique_by) and not isinstance(unique_by, bool):
        try:
            made = unique_by(*args, **kwargs)
        except Exception as exc:
            raise BadRequest(f"task {task.name}: its unique_by function failed: {exc!r}") from None
        what = ["by", str(made)]
    else:
        bound = _bound(task, args, kwargs)
        if isinstance(unique_by, tuple):
            what = ["of", {name: bound.get(name) for name in unique_by}]
        else:
            what = ["call", bound]
    try:
        raw = _canonical([task.name, what])
    except (TypeError, msgspec.EncodeError) as exc:
        raise BadRequest(f"task {task.name}: its arguments must be JSON values ({exc})") from None
    return hashlib.sha256(raw).hexdigest()


def _bound(task: Task[Any, Any], args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call as parameter name → value (defaults applied), or as given when the
    function's parameters cannot be told."""
    if task.signature is None:
        return {"args": list(args), "kwargs": kwargs}
    try:
        bound = task.signature.bind(*args, **kwargs)
    except TypeError:
        return {"args": list(args), "kwargs": kwargs}
    bound.apply_defaults()
    return dict(bound.arguments)
