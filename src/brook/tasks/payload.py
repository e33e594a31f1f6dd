"""What a task's record holds, and what a finished job leaves: JSON, bounded.

A job is one record on its task's topic: the value is JSON
`{"task": name, "args": [...], "kwargs": {...}}`, the key is the job's key (per-key
limits and fairness act on it), and the headers name the task (`brook.task`) and
carry its priority and delay (brook.scheduling). So any producer in any language
can enqueue a job with one append, and `brook consume` shows jobs as they are.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

import msgspec

import brook
from brook import join_headers, limits
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


def decode_job(value: bytes, headers: dict[str, bytes] | None) -> Call:
    """The call a job's record makes: its own arguments, after those a join passes
    it (brook/join_headers.py) when the record is a join's continuation: the result
    before it (a chain's link), the list of results (a chord's callback; a failed
    member, where failures are allowed, as a brook.TaskFailed), or the failed job's
    reference and error (an on_error record). ValueError when it holds no call."""
    call = decode_call(value)
    if not headers or join_headers.JOIN not in headers:
        return call
    error = headers.get(join_headers.ERROR)
    if error is not None:
        failed = headers.get(join_headers.FAILED, b"").decode(errors="replace")
        given: list[Any] = [failed, error.decode(errors="replace")]
        return Call(call.task, given + call.args, call.kwargs)
    passing = headers.get(join_headers.PASS, b"none").decode(errors="replace")
    raw = headers.get(join_headers.RESULTS)
    if passing == "none" or raw is None:
        return call
    results = [_member_result(o) for o in join_headers.decode_results(raw)]
    first: Any = results[0] if passing == "one" and results else results
    return Call(call.task, [first, *call.args], call.kwargs)


def _member_result(outcome: join_headers.Outcome) -> Any:
    ok, data, ref = outcome
    if ok:
        return decode_result(data or None)
    from brook.tasks.results import TaskFailed

    return TaskFailed(ref, data.decode(errors="replace"))


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
    """`Type: message`, then `  file:line in function` of the innermost frames of the
    task's own code (innermost last), within the status log's reason bound: what a
    failed attempt leaves for `app.job(ref).error`, and what its dead record is grouped
    by (queue/error_groups.py: the type and the last frame). Brook's own frames and the
    standard library's (the threads that ran the task, or json failing inside a call
    of the task's) are left out; third-party packages' are kept. When no other frame
    is left, the innermost is kept, whatever it is.
    Over the bound, the outermost frames go first (down to one), then the message."""
    head = f"{type(error).__name__}: {error}"
    frames = traceback.extract_tb(error.__traceback__)
    own = [frame for frame in frames if not _is_machinery(frame.filename)] or frames[-1:]
    lines = [f"  {f.filename}:{f.lineno} in {f.name}" for f in own[-limits.error_summary_frames :]]
    return _fitted(head, lines, limits.queue_reason_chars_max)


def _fitted(head: str, lines: list[str], chars_max: int) -> str:
    """`head`, then `lines`, one a line, in at most `chars_max` characters: the frames
    take at most half (their innermost kept), the message is cut to what is left."""
    while len(lines) > 1 and sum(len(line) + 1 for line in lines) > chars_max // 2:
        lines = lines[1:]
    tail = "".join(f"\n{line}" for line in lines)
    room = chars_max - len(tail)
    if len(head) > room:
        head = head[: max(0, room - 1)] + "…"
    return (head + tail)[:chars_max]


def _machinery_paths() -> tuple[str, ...]:
    """Where code that is not the task's own lives: Brook's package and the standard
    library (directories end in a separator), as imported and with links resolved.
    From the modules themselves: a user's own directory may well be called brook.
    Third-party packages (site-packages) count as the user's: a task calls them."""
    dirs = [
        os.path.dirname(str(brook.__file__)),
        os.path.dirname(str(os.__file__)),  # the standard library
    ]
    found: set[str] = set()
    for resolve in (os.path.abspath, os.path.realpath):
        found.update(resolve(d) + os.sep for d in dirs)
    return tuple(sorted(found))


_MACHINERY = _machinery_paths()
_BROOK = tuple(
    {
        resolve(os.path.dirname(str(brook.__file__))) + os.sep
        for resolve in (os.path.abspath, os.path.realpath)
    }
)


def _is_machinery(filename: str) -> bool:
    path = os.path.abspath(filename)
    if f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path:
        return path.startswith(_BROOK)  # (the standard library's folder holds these)
    return path.startswith(_MACHINERY)
