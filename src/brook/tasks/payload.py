"""What a task's record holds, and what a finished job leaves: JSON, bounded.

A job is one record on its task's topic: the value is JSON
`{"task": name, "args": [...], "kwargs": {...}}`, the key is the job's key (per-key
limits and fairness act on it), and the headers name the task (`brook.task`) and
carry its priority and delay (brook.scheduling). So any producer in any language
can enqueue a job with one append, and `brook consume` shows jobs as they are.
"""

from __future__ import annotations

import traceback
from typing import Any

import msgspec

from brook import limits
from brook.errors import BadRequest
from brook.tasks import arguments

TASK_HEADER = "brook.task"
CONTENT_TYPE = "application/json"


class Call(msgspec.Struct, frozen=True):
    """A job's call: which task, with which arguments."""

    task: str
    args: list[Any] = []
    kwargs: dict[str, Any] = {}


_encode = msgspec.json.Encoder().encode
_decode_call = msgspec.json.Decoder(Call).decode


def encode_call(task: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """The record value of a call. Raises BadRequest naming the argument when one is
    not a plain JSON value (arguments.check): what is encoded decodes back equal and
    of the same type, never as something else."""
    try:
        arguments.check(args, kwargs)
        return _encode(Call(task, list(args), kwargs))
    except BadRequest as exc:
        raise BadRequest(f"task {task}: {exc}") from None
    except (TypeError, ValueError, msgspec.EncodeError) as exc:  # a str with a lone surrogate
        raise BadRequest(f"task {task}: its arguments must be JSON values ({exc})") from None


def decode_call(value: bytes) -> Call:
    """The call a record holds; ValueError when it holds none."""
    try:
        return _decode_call(value)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a task record: {exc}") from None


def encode_result(value: Any) -> tuple[bytes | None, str]:
    """The JSON of what a task returned, and "" or why it is not kept (not JSON, or
    larger than job_result_bytes_max)."""
    try:
        raw = _encode(value)
    except (TypeError, msgspec.EncodeError) as exc:
        return None, f"its result is not a JSON value ({exc}): not kept"
    if len(raw) > limits.job_result_bytes_max:
        return None, (
            f"its result of {len(raw)} bytes is over job_result_bytes_max "
            f"({limits.job_result_bytes_max}): not kept"
        )
    return raw, ""


def decode_result(raw: bytes | None) -> Any:
    return None if raw is None else msgspec.json.decode(raw)


def error_summary(error: BaseException) -> str:
    """`Type: message` and the innermost frames of the traceback, within the status
    log's reason bound: what a failed attempt leaves for `app.job(ref).error`."""
    head = f"{type(error).__name__}: {error}"
    frames = traceback.extract_tb(error.__traceback__)[-5:]
    lines = [f"  {f.filename}:{f.lineno} in {f.name}" for f in frames]
    text = "\n".join([head, *lines]) if lines else head
    return text[: limits.queue_reason_chars_max]
