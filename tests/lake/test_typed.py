"""Typed columns: a topic's JSON Schema makes the lake keep its values' fields as a
typed `fields` struct, decoded once at write time; what does not fit is null, never
an error, and the value is kept whole."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brook
from brook import value_schema
from brook.errors import BadRequest, Conflict
from brook.lake.typed import fields_column
from tests.lake.outside import Outside
from tests.served import Served

ORDER = {
    "type": "object",
    "properties": {
        "customer": {"type": "string"},
        "amount": {"type": "number"},
        "items": {"type": "integer"},
        "paid": {"type": ["boolean", "null"]},
        "placed_at": {"type": "string", "format": "date-time"},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {},
    },
    "required": ["customer"],
}


def test_the_lake_keeps_declared_fields_as_typed_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with brook.open(tmp_path / "brook-data", lake=True) as b:
        info = b.create_topic("orders", value_schema=ORDER)
        assert info.value_schema == ORDER
        t = b.topic("orders")
        t.append(
            json.dumps(
                {
                    "customer": "ada",
                    "amount": 12.5,
                    "items": 3,
                    "paid": True,
                    "placed_at": "2026-11-27T10:00:00Z",
                    "address": {"city": "Paris"},
                    "tags": ["new", "gift"],
                    "extra": {"any": [1, 2]},
                }
            ).encode()
        )
        t.append(b'{"customer": "bob", "amount": 7, "items": "three", "placed_at": "soon"}')
        t.append(b"not json at all")
        t.append(b"[1, 2, 3]")
        b.lake_sync()
    monkeypatch.chdir(tmp_path)
    files = [f"brook-data/{f.name}" for f in Outside(tmp_path / "brook-data").files("orders")]
    got = duckdb.sql(
        f"""SELECT "offset", fields.customer, fields.amount, fields.items, fields.paid,
        fields.placed_at, fields.address.city, fields.tags, fields.extra
        FROM read_parquet({files!r}) ORDER BY "offset" """
    ).fetchall()
    placed = datetime.datetime(2026, 11, 27, 10, 0, tzinfo=datetime.UTC)
    assert got[0][:6] == (0, "ada", 12.5, 3, True, placed)
    assert got[0][6:] == ("Paris", ["new", "gift"], '{"any":[1,2]}')
    assert got[1] == (1, "bob", 7.0, None, None, None, None, None, None)
    assert got[2] == (2, *[None] * 8) and got[3] == (3, *[None] * 8)
    total = duckdb.sql(f"SELECT sum(fields.amount) FROM read_parquet({files!r})").fetchall()
    assert total == [(19.5,)]
    values = duckdb.sql(f'SELECT value FROM read_parquet({files!r}) ORDER BY "offset"').fetchall()
    assert values[2] == (b"not json at all",), "the value itself is kept whole"


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ([1], "must be a JSON Schema object"),
        ({"type": "string"}, "must describe an object with properties"),
        ({"type": "object", "properties": {"1st": {"type": "string"}}}, "becomes a column"),
        ({"type": "object", "properties": {"a": {"type": "decimal"}}}, "is not one of"),
        ({"type": "object", "properties": {"a": {"type": ["string", "number"]}}}, "one type"),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, "needs items"),
        ({"type": "object", "properties": {"a": {"type": "object"}}}, "needs properties"),
        ({"type": "object", "properties": {"a": "string"}}, "must be an object"),
        ({"type": "object", "properties": {1: {"type": "string"}}}, "becomes a column"),
        ({"type": "object", "properties": {"a": {"x": object()}}}, "must be JSON"),
    ],
)
def test_a_schema_brook_cannot_use_is_refused_saying_why(
    tmp_path: Path, schema: Any, says: str
) -> None:
    with pytest.raises(BadRequest, match=says):
        value_schema.check(schema)
    with brook.open(tmp_path / "data") as b:
        with pytest.raises(BadRequest, match=says):
            b.create_topic("t", value_schema=schema)
        assert b.topics() == []


def test_the_schema_is_a_setting_of_the_topic_on_every_surface(tmp_path: Path) -> None:
    schema_file = tmp_path / "order.json"
    schema_file.write_text(json.dumps(ORDER))
    served = Served(tmp_path / "data", "--lake")
    try:
        cli = [sys.executable, "-m", "brook.cli", "topics"]
        where = ["--url", f"http://127.0.0.1:{served.port}"]
        subprocess.run(
            [*cli, "create", "orders", "--value-schema", f"@{schema_file}", *where],
            check=True,
            capture_output=True,
        )
        shown = subprocess.run(
            [*cli, "describe", "orders", *where], check=True, capture_output=True, text=True
        ).stdout
        assert f"value_schema: {json.dumps(ORDER)}" in shown
        bad = subprocess.run(
            [*cli, "create", "x", "--value-schema", "{nope", *where], capture_output=True, text=True
        )
        assert bad.returncode != 0 and "not JSON" in bad.stderr and "Traceback" not in bad.stderr
        with brook.connect(f"http://127.0.0.1:{served.port}") as client:
            assert [t.value_schema for t in client.topics()] == [ORDER]
            with pytest.raises(Conflict):
                other = {"type": "object", "properties": {"other": {"type": "string"}}}
                client.create_topic("orders", value_schema=other)
            with pytest.raises(BadRequest, match="is not one of"):
                client.create_topic(
                    "y", value_schema={"type": "object", "properties": {"a": {"type": "x"}}}
                )
    finally:
        served.close()
    with brook.open(tmp_path / "data", read_only=True) as b:  # stored with the topic
        assert b.topics()[0].value_schema == ORDER


SCALARS = {
    "string": st.text(max_size=20),
    "integer": st.integers(-(2**63), 2**63 - 1),
    "number": st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
}


@st.composite
def schemas_and_values(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    names = draw(
        st.lists(
            st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
            min_size=1,
            max_size=6,
            unique=True,
        )
    )
    kinds = {n: draw(st.sampled_from(sorted(SCALARS))) for n in names}
    schema = {"type": "object", "properties": {n: {"type": k} for n, k in kinds.items()}}
    rows = draw(
        st.lists(
            st.fixed_dictionaries({}, optional={n: SCALARS[k] for n, k in kinds.items()}),
            max_size=20,
        )
    )
    return schema, rows


@settings(max_examples=60, deadline=None)
@given(schemas_and_values())
def test_values_that_follow_the_schema_come_back_field_for_field(
    case: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    schema, rows = case
    column = fields_column([json.dumps(r).encode() for r in rows], value_schema.check(schema))
    for row, got in zip(rows, column.to_pylist(), strict=True):
        assert got == {n: row.get(n) for n in schema["properties"]}


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.binary(max_size=40), st.from_regex(r"\{.{0,30}\}").map(str.encode)),
        max_size=20,
    )
)
def test_any_bytes_give_a_row_each_and_never_an_error(values: list[bytes | None]) -> None:
    column = fields_column(values, value_schema.check(ORDER))
    assert len(column) == len(values)
