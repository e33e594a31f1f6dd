"""The wire contract: one set of Structs for the server, the clients and /openapi.json."""

from __future__ import annotations

import inspect

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook import wire
from brook.errors import BadRequest
from brook.records import Record
from brook.server.openapi import _schemas

header_names = st.text(min_size=1, max_size=8)
records = st.builds(
    Record,
    value=st.binary(max_size=64),
    key=st.none() | st.binary(max_size=16),
    headers=st.none() | st.dictionaries(header_names, st.binary(max_size=8), min_size=1),
    topic=st.just("t"),
    partition=st.integers(0, 100),
    offset=st.integers(0, 2**62),
    timestamp=st.integers(0, 2**50),
)


@given(records)
def test_a_record_read_over_json_comes_back_the_same(record: Record) -> None:
    answer = wire.encode(wire.RecordPage(records=[wire.RecordOut.of(record)], next_offset=1))
    (out,) = wire.decode_answer(answer, wire.RecordPage).records
    assert out.record("t") == record


@given(records)
def test_text_forms_are_given_exactly_when_the_bytes_are_text(record: Record) -> None:
    document = msgspec.json.decode(wire.encode(wire.RecordOut.of(record)))
    try:
        text = record.value.decode()
    except UnicodeDecodeError:
        assert "value" not in document
    else:
        assert document["value"] == text


@given(records)
def test_a_record_sent_as_json_is_appended_as_given(record: Record) -> None:
    body = wire.encode(
        wire.RecordsIn(
            records=[
                wire.RecordIn(
                    value_b64=record.value, key_b64=record.key, headers_b64=record.headers
                )
            ]
        )
    )
    columns = wire.decode_request(body, wire.RecordsIn).columns()
    assert columns.values == [record.value]
    assert (columns.keys or [None]) == [record.key]
    assert (columns.headers or [None]) == [record.headers]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"records": [{"value": "a", "ofset": 1}]}', "unknown field `ofset`"),
        (b'{"records": [{"value": "a", "value_b64": "YQ=="}]}', "value or value_b64, not both"),
        (b'{"records": [{"value": "a", "headers": {}, "headers_b64": {}}]}', "not both"),
        (b'{"records": [{"key": "k"}]}', "needs value or value_b64"),
        (b'{"records": [{"value_b64": "!!"}]}', "base64"),
        (b'{"records": [{"value": "\\udc00"}]}', "surrogate"),
        (b'{"records": [', "not valid JSON"),
        (b'{"records": {}}', "Expected `array`"),
    ],
)
def test_a_request_that_does_not_fit_is_a_bad_request_saying_where(body: bytes, says: str) -> None:
    with pytest.raises(BadRequest, match=says):
        wire.decode_request(body, wire.RecordsIn).columns()


def test_limits_in_the_structs_are_enforced_when_decoding() -> None:
    with pytest.raises(BadRequest, match="max_records"):
        wire.decode_request(b'{"max_records": 0}', wire.LeaseIn)
    with pytest.raises(BadRequest, match="offset"):
        wire.decode_request(b'{"partition": 0, "offset": 18446744073709551616}', wire.SeekIn)
    with pytest.raises(BadRequest, match="dead_letter_topic"):
        wire.decode_request(b'{"dead_letter_topic": "no spaces"}', wire.QueueSettingsIn)
    assert wire.decode_request(b"  ", wire.LeaseIn, empty_ok=True) == wire.LeaseIn()


def test_every_shape_is_listed_and_has_a_schema() -> None:
    shapes = {
        kind
        for _, kind in inspect.getmembers(wire, inspect.isclass)
        if kind.__module__ == wire.__name__ and issubclass(kind, wire.In | wire.Out)
    } - {wire.In, wire.Out, wire.RecordFields}
    listed = set(wire.REQUESTS) | set(wire.ANSWERS)
    components = _schemas()
    # Parts of listed shapes (a record in a batch, a job's backoff) are in by reference.
    assert {k for k in shapes - listed if k.__name__ not in components} == set()
    assert {k.__name__ for k in listed} <= set(components)
    for kind in wire.REQUESTS:
        assert components[kind.__name__]["additionalProperties"] is False, kind


@given(st.integers(0, 2**53), st.integers(1, 1000))
def test_whole_numbers_written_as_floats_are_taken_as_integers(offset: int, ms: int) -> None:
    """JSON Schema's `integer` takes 2.0 and 1e3: so does the API; 2.5 stays refused."""
    body = b'{"receipts": ["1.%d.1.1.0000abcd"], "ms": %s}' % (offset, repr(float(ms)).encode())
    decoded = wire.decode_request(body, wire.ExtendIn)
    assert decoded.ms == ms and isinstance(decoded.ms, int)
    with pytest.raises(BadRequest, match="got `float`"):
        wire.decode_request(b'{"receipts": ["1.1.1.1.0000abcd"], "ms": 2.5}', wire.ExtendIn)


def test_base64_fields_are_documented_with_the_pattern_the_decoder_holds() -> None:
    import re

    pattern = re.compile(wire.BASE64_PATTERN[1:-1])
    for text in ["", "AA==", "AAE=", "AAEC", "+/+/", "AA", "AA=", "-_-_", "A===", "AAE"]:
        decoded = True
        try:
            wire.decode_request(b'{"value_b64": "%s"}' % text.encode(), wire.RecordIn)
        except BadRequest:
            decoded = False
        assert decoded == bool(pattern.fullmatch(text)), text
