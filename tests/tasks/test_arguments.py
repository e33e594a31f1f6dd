"""A task's arguments: plain JSON values are carried exactly, anything else is refused
at enqueue with its place, its type and what to pass instead (brook/tasks/arguments.py)."""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import math
import re
import uuid
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook.errors import BadRequest
from brook.tasks import arguments, payload


class Colour(enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    SMALL = 1


REFUSED = [
    (b"raw", "bytes", "base64"),
    (bytearray(b"raw"), "bytearray", "base64"),
    (memoryview(b"raw"), "memoryview", "base64"),
    (datetime.datetime(2024, 5, 1, 12, 0), "datetime", "isoformat"),
    (datetime.date(2024, 5, 1), "date", "isoformat"),
    (datetime.time(12, 0), "time", "isoformat"),
    (datetime.timedelta(seconds=3), "timedelta", "total_seconds"),
    (uuid.UUID(int=7), "UUID", "str(value)"),
    (decimal.Decimal("1.10"), "Decimal", "str(value)"),
    ({1, 2}, "set", "list"),
    (frozenset({1}), "frozenset", "list"),
    ((1, 2), "tuple", "list(value)"),
    (math.nan, "the float nan", "NaN or infinity"),
    (math.inf, "the float inf", "NaN or infinity"),
    (-math.inf, "the float -inf", "NaN or infinity"),
    (2**64, "an int beyond 64 bits", "str(value)"),
    (-(2**63) - 1, "an int beyond 64 bits", "str(value)"),
    (object(), "object", "pass None, bool"),
    (Colour.RED, "Colour", "value.value"),
    (Size.SMALL, "Size", "value.value"),
    (collections.OrderedDict(a=1), "OrderedDict", "plain dict"),
    (1 + 2j, "complex", "real"),
]


@pytest.mark.parametrize(("value", "named", "hint"), REFUSED, ids=[r[1] for r in REFUSED])
def test_every_value_that_would_arrive_as_something_else_is_refused(
    value: Any, named: str, hint: str
) -> None:
    with pytest.raises(BadRequest) as positional:
        payload.encode_call("charge", ("o-1", value), {})
    assert str(positional.value).startswith("task charge: args[1] is ")
    assert named in str(positional.value)
    assert hint in str(positional.value)
    with pytest.raises(BadRequest, match=r"kwargs\['amount'\] is"):
        payload.encode_call("charge", (), {"amount": value})


@pytest.mark.parametrize(
    ("call", "where"),
    [
        ((([1, 2, b"x"],), {}), "args[0][2] is of type bytes"),
        (
            ((), {"order": {"items": [{}, {}, {"at": datetime.date.today()}]}}),
            "kwargs['order']['items'][2]['at'] is of type date",
        ),
        (
            ((), {"totals": {"eur": decimal.Decimal(1)}}),
            "kwargs['totals']['eur'] is of type Decimal",
        ),
        ((([{1: "a"}],), {}), "args[0][0][1] is under a key of type int"),
        ((([0.5] * 20 + [math.nan],), {}), "args[0][20] is the float nan"),
        ((([7] * 20 + [2**70],), {}), "args[0][20] is an int beyond 64 bits"),
        ((({"a": (1,)},), {}), "args[0]['a'] is of type tuple"),
    ],
)
def test_a_refusal_names_the_place_inside_the_argument(call: Any, where: str) -> None:
    args, kwargs = call
    with pytest.raises(BadRequest, match=f"^task t: {_escaped(where)}, not a JSON value"):
        payload.encode_call("t", args, kwargs)


def test_nesting_is_bounded_and_a_list_that_holds_itself_is_refused() -> None:
    deep: list[Any] = []
    for _ in range(arguments.DEPTH_MAX + 5):
        deep = [deep]
    looped: list[Any] = []
    looped.append(looped)
    for value in (deep, looped):
        with pytest.raises(BadRequest, match="nested deeper than"):
            payload.encode_call("t", (value,), {})
    shallow: list[Any] = []
    for _ in range(arguments.DEPTH_MAX - 1):
        shallow = [shallow]
    assert msgspec.json.decode(payload.encode_call("t", (shallow,), {}))["args"] == [shallow]


def test_a_str_json_cannot_hold_is_refused_and_the_bounds_themselves_pass() -> None:
    with pytest.raises(BadRequest, match="task t: its arguments must be JSON values"):
        payload.encode_call("t", ("\ud800",), {})  # a lone surrogate: no UTF-8 for it
    edges = [arguments.INT_MIN, arguments.INT_MAX, -0.0, 5e-324, 1.7976931348623157e308, ""]
    call = payload.decode_call(payload.encode_call("t", tuple(edges), {"k": edges}))
    assert call.args == edges and call.kwargs == {"k": edges}


def _escaped(text: str) -> str:
    return re.escape(text)


# ------------------------------------------------------------------ the property

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=arguments.INT_MIN, max_value=arguments.INT_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)
"""Plain JSON values: every one must pass."""

ANYTHING = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary(max_size=8)
    | st.datetimes()
    | st.dates()
    | st.uuids()
    | st.decimals(places=2, allow_nan=False)
    | st.sampled_from([Colour.RED, Size.SMALL, object]),
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.frozensets(st.integers(), max_size=3)
        | st.dictionaries(st.text(max_size=4) | st.integers(), children, max_size=4)
    ),
    max_leaves=30,
)
"""Anything at all: what passes must come back as it went."""


def _same(sent: Any, received: Any) -> bool:
    """Equal and of the same type, all the way down (floats by their bits' meaning:
    -0.0 stays -0.0)."""
    if type(sent) is not type(received):
        return False
    if isinstance(sent, list):
        return len(sent) == len(received) and all(map(_same, sent, received))
    if isinstance(sent, dict):
        return list(sent) == list(received) and all(_same(sent[k], received[k]) for k in sent)
    if isinstance(sent, float):
        return sent == received and math.copysign(1, sent) == math.copysign(1, received)
    return bool(sent == received)


@settings(max_examples=300, deadline=None)
@given(st.lists(ANYTHING, max_size=4), st.dictionaries(st.text(max_size=6), ANYTHING, max_size=3))
def test_what_the_check_lets_through_arrives_equal_and_of_the_same_type(
    args: list[Any], kwargs: dict[str, Any]
) -> None:
    try:
        value = payload.encode_call("t", tuple(args), kwargs)
    except BadRequest:
        return
    call = payload.decode_call(value)
    assert _same(args, call.args) and _same(kwargs, call.kwargs)


@settings(max_examples=300, deadline=None)
@given(st.lists(JSON, max_size=4), st.dictionaries(st.text(max_size=6), JSON, max_size=3))
def test_every_plain_json_value_passes(args: list[Any], kwargs: dict[str, Any]) -> None:
    call = payload.decode_call(payload.encode_call("t", tuple(args), kwargs))
    assert _same(args, call.args) and _same(kwargs, call.kwargs)
