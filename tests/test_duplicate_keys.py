"""brook.duplicate_keys: a repeated name in any object is found, whatever the
spacing and escaping, and a document without one is never refused."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook import wire
from brook.duplicate_keys import has_duplicates
from brook.errors import BadRequest

# Names built from characters that stress the counting: quotes, backslashes, colons.
names = st.text(alphabet='ab":\\ \n', max_size=4)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), names)


@st.composite
def documents(draw: Any, depth: int = 0) -> tuple[Any, bool]:
    """A JSON value as nested ("object", [(name, child)]) / ("array", [...]) / scalar,
    and whether any object in it repeats a name."""
    if depth >= 3 or draw(st.integers(0, 2)) == 0:
        return draw(scalars), False
    if draw(st.booleans()):
        items = [draw(documents(depth + 1)) for _ in range(draw(st.integers(0, 3)))]
        return ("array", [value for value, _ in items]), any(dup for _, dup in items)
    pairs = []
    repeated = False
    for _ in range(draw(st.integers(0, 4))):
        value, dup = draw(documents(depth + 1))
        pairs.append((draw(names), value))
        repeated = repeated or dup
    keys = [name for name, _ in pairs]
    repeated = repeated or len(set(keys)) != len(keys)
    return ("object", pairs), repeated


def render(value: Any, space: str) -> str:
    if isinstance(value, tuple) and value[0] == "object":
        inner = f",{space}".join(
            f"{json.dumps(name)}{space}:{space}{render(child, space)}" for name, child in value[1]
        )
        return "{" + space + inner + space + "}"
    if isinstance(value, tuple) and value[0] == "array":
        return "[" + f",{space}".join(render(child, space) for child in value[1]) + "]"
    return json.dumps(value)


@given(documents(), st.sampled_from(["", " ", "\n  "]))
def test_the_verdict_is_exact_for_any_document_and_spacing(
    document: tuple[Any, bool], space: str
) -> None:
    value, repeated = document
    body = render(value, space).encode()
    assert has_duplicates(body, msgspec.json.decode(body)) is repeated


@given(
    st.lists(
        st.fixed_dictionaries(
            {"value": st.text(max_size=20)},
            optional={"key": st.text(max_size=5), "headers": st.dictionaries(names, names)},
        ),
        max_size=5,
    )
)
def test_record_batches_pass_and_a_repeated_field_is_refused(records: list[Any]) -> None:
    body = msgspec.json.encode({"records": records})
    assert len(wire.decode_request(body, wire.RecordsIn).records) == len(records)
    if records:
        repeated = body.replace(b'"value":', b'"value":"x","value":', 1)
        with pytest.raises(BadRequest, match="same field twice"):
            wire.decode_request(repeated, wire.RecordsIn)


@pytest.mark.parametrize(
    "body",
    [
        b'{"records":[],"records":[{"value":"x"}]}',
        b'{"records":[{"value":"a","key":"k","key":"k"}]}',
        b'{"records":[{"value":"a","headers":{"h":"1","h":"2"}}]}',
        b'{"records":[{"value":"a" , "value" : "b"}]}',
    ],
)
def test_repeats_at_every_level_are_refused(body: bytes) -> None:
    with pytest.raises(BadRequest, match="same field twice"):
        wire.decode_request(body, wire.RecordsIn)


def test_not_utf8_and_deep_nesting_are_bad_requests() -> None:
    with pytest.raises(BadRequest, match="not UTF-8"):
        wire.decode_request(b'{"records":[{"value":"\xff"}]}', wire.RecordsIn)
    for deep in (b"[" * 100_000, b'{"records":' + b"[" * 100_000, b'{"a":' * 100_000):
        with pytest.raises(BadRequest):
            wire.decode_request(deep, wire.RecordsIn)
