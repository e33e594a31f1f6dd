"""What a task's arguments may be: plain JSON values, so they arrive as they were sent.

A job's arguments cross as JSON (payload.py), and JSON carries only None, bool, int,
float, str, lists and objects with text keys. Anything else would arrive as something
else: bytes as a base64 str, a datetime, Decimal or UUID as a str, a set or tuple as a
list, `{1: "a"}` as `{"1": "a"}`, NaN as null. So `check` refuses at enqueue every value
that would not decode back equal and of the same type, naming where it is, what it is
and what to pass instead. Exact types only: a subclass (an IntEnum, an OrderedDict)
would arrive as its base.
"""

from __future__ import annotations

import enum
import math
from typing import Any, NoReturn

from brook import limits
from brook.errors import BadRequest

INT_MIN = -(2**63)
INT_MAX = 2**64 - 1
"""Whole numbers every JSON library in common use reads back exactly (64 bits);
a larger one goes as a str."""
DEPTH_MAX = limits.task_argument_depth_max

_SCALARS = frozenset({str, bool, type(None)})
_HINTS: dict[str, str] = {
    "bytes": "pass text (value.decode()) or base64 text (base64.b64encode(value).decode())",
    "bytearray": "pass text (value.decode()) or base64 text (base64.b64encode(value).decode())",
    "memoryview": "pass text or base64 text (base64.b64encode(value).decode())",
    "datetime": "pass value.isoformat() (or a timestamp) and parse it in the task",
    "date": "pass value.isoformat() and parse it in the task",
    "time": "pass value.isoformat() and parse it in the task",
    "timedelta": "pass value.total_seconds() (or a number of ms)",
    "UUID": "pass str(value)",
    "Decimal": "pass str(value) (exact) or a number",
    "Fraction": "pass str(value) or a number",
    "complex": "pass [value.real, value.imag]",
    "set": "pass a list (sorted(value) or list(value))",
    "frozenset": "pass a list (sorted(value) or list(value))",
    "tuple": "pass a list (list(value))",
}


def check(args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> None:
    """Raise BadRequest unless every argument is a plain JSON value (recursively):
    None, bool, an int from INT_MIN to INT_MAX, a finite float, str, a list, a dict
    with str keys. The message names the argument (`args[1]`, `kwargs['order']`), the
    path inside it, its type, and what to pass instead. Pure; fast when the arguments
    are a few scalars."""
    for index, value in enumerate(args):
        if not _plain(value):
            _check_value(value, f"args[{index}]")
    for name, value in kwargs.items():
        if type(name) is not str:
            raise BadRequest(f"keyword {name!r} is of type {type(name).__name__}: keywords are str")
        if not _plain(value):
            _check_value(value, f"kwargs[{name!r}]")


def _plain(value: Any) -> bool:
    """The common case, told at once: a str, bool, None or a 64-bit int."""
    kind = type(value)
    return kind in _SCALARS or (kind is int and INT_MIN <= value <= INT_MAX)


def _check_value(value: Any, where: str) -> None:
    if type(value) is list or type(value) is dict:
        _check_container(value, (where,), 0)
    else:
        _check_scalar(value, (where,))


def _check_container(container: Any, path: tuple[Any, ...], depth: int) -> None:
    """Check a list's or dict's elements, recursing into those that hold more. A path
    is a chain `(parent, step)` from `(where,)`, spelled out only to refuse. The loop
    is written out (no call per element): a list of a thousand records is common."""
    if depth >= DEPTH_MAX:
        _refuse(path, f"nested deeper than {DEPTH_MAX}", "flatten it (or does it hold itself?)")
    is_dict = type(container) is dict
    if not is_dict and len(container) > 16 and _all_plain(container):
        return
    low, high = INT_MIN, INT_MAX
    for step, element in container.items() if is_dict else enumerate(container):
        if is_dict and type(step) is not str:
            _refuse(
                (path, step),
                f"under a key of type {type(step).__name__}",
                "JSON object keys are text: give the dict str keys (str(key))",
            )
        kind = type(element)
        if kind is str or element is None or kind is bool:
            continue
        if kind is int:
            if low <= element <= high:
                continue
        elif kind is float:
            if element - element == 0.0:  # finite: inf - inf and nan - nan are nan
                continue
        elif kind is list or kind is dict:
            _check_container(element, (path, step), depth + 1)
            continue
        _check_scalar(element, (path, step))


def _all_plain(values: list[Any]) -> bool:
    """Whether a long list holds only plain scalars of one kind (ids, names, amounts),
    told at C speed; False means "look at each"."""
    kinds = set(map(type, values))
    if kinds <= _SCALARS:
        return True
    if kinds == {int}:
        return bool(min(values) >= INT_MIN and max(values) <= INT_MAX)
    if kinds == {float}:
        return all(map(math.isfinite, values))
    return False


def _check_scalar(item: Any, path: tuple[Any, ...]) -> None:
    kind = type(item)
    if kind in _SCALARS:
        return
    if kind is int:
        if not INT_MIN <= item <= INT_MAX:
            _refuse(path, "an int beyond 64 bits", "pass str(value)")
    elif kind is float:
        if not math.isfinite(item):
            _refuse(path, f"the float {item!r}", "JSON has no NaN or infinity: pass None or a str")
    else:
        _refuse(path, f"of type {kind.__qualname__}", _hint(item))


def _refuse(path: tuple[Any, ...], what: str, hint: str) -> NoReturn:
    raise BadRequest(f"{_spelled(path)} is {what}, not a JSON value: {hint}")


def _spelled(path: tuple[Any, ...]) -> str:
    """`args[1]['items'][2]` from its chain."""
    steps = []
    while len(path) == 2:
        path, step = path
        steps.append(f"[{step!r}]")
    return str(path[0]) + "".join(reversed(steps))


def _hint(value: Any) -> str:
    name = type(value).__name__
    if name in _HINTS:
        return _HINTS[name]
    if isinstance(value, enum.Enum):
        return "pass value.value (or value.name) and look the member up in the task"
    for base in (bool, int, float, str, list, dict):
        if isinstance(value, base):  # an Enum member, an OrderedDict, a str subclass...
            return f"it would arrive as a plain {base.__name__}: pass {base.__name__}(value)"
    return "pass None, bool, int, float, str, or lists and dicts (str keys) of them"
