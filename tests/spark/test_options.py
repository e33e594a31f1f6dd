"""The data source's options and admission control, without Spark."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook.errors import BadRequest, InvalidName
from brook.spark.options import (
    AtTime,
    parse_offsets,
    queue_options,
    read_options,
    resolve,
    write_options,
)
from brook.spark.source import allot


def test_option_names_ignore_case_and_underscores() -> None:
    options = read_options(
        {"PATH": "/d", "topic": "t", "StartingOffsets": '{"1": 4}', "max_records_per_trigger": "9"},
        streaming=True,
    )
    assert (options.location, options.starting, options.max_records_per_trigger) == (
        "/d",
        {1: 4},
        9,
    )
    assert read_options({"url": "s3://b/p", "topic": "t", "endpointUrl": "http://e"}, False)[1] == {
        "endpoint_url": "http://e"
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "t"}, "exactly one of"),
        ({"path": "/d", "url": "s3://b", "topic": "t"}, "exactly one of"),
        ({"url": "http://127.0.0.1:8080", "topic": "t"}, "straight to storage"),
        ({"path": "s3://b/p", "topic": "t"}, "give 's3://b/p' as \"url\""),
        ({"path": "/d", "topic": "t", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"path": "/d", "topic": "t", "maxRecordsPerTrigger": "0"}, "must be positive"),
        ({"path": "/d", "topic": "t", "endingOffsets": "earliest"}, "reads nothing"),
        ({"path": "/d", "topic": "t", "startingTimestamp": "yesterday"}, "ms since the epoch"),
        ({"path": "/d", "topic": "t", "endingTimestamp": "-5"}, "ms since the epoch"),
        (
            {"path": "/d", "topic": "t", "startingOffsets": "earliest", "startingTimestamp": "1"},
            "startingOffsets or startingTimestamp, not both",
        ),
    ],
)
def test_bad_read_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(BadRequest, match=message.replace("(", r"\(")):
        read_options(options, streaming=False)


def test_times_stand_for_offsets() -> None:
    given = {"path": "/d", "topic": "t", "starting_timestamp": "1700000000000"}
    options = read_options({**given, "endingTimestamp": "1800000000000"}, streaming=False)
    assert (options.starting, options.ending) == (
        AtTime(1_700_000_000_000),
        AtTime(1_800_000_000_000),
    )
    assert read_options(given, streaming=True).starting == AtTime(1_700_000_000_000)


def test_streams_take_no_ending_and_need_a_valid_topic() -> None:
    with pytest.raises(BadRequest, match="a stream reads on"):
        read_options({"path": "/d", "topic": "t", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(BadRequest, match="endingTimestamp is for batch queries"):
        read_options({"path": "/d", "topic": "t", "endingTimestamp": "5"}, streaming=True)
    with pytest.raises(InvalidName):
        read_options({"path": "/d", "topic": "__internal"}, streaming=True)


def test_a_queue_table_takes_a_group_and_no_range() -> None:
    options, group = queue_options({"path": "/d", "topic": "t", "Group": "billing"})
    assert (options.location, options.topic, options.starting, group) == (
        "/d",
        "t",
        "earliest",
        "billing",
    )
    for extra in ("startingOffsets", "startingTimestamp", "endingTimestamp", "failOnDataLoss"):
        with pytest.raises(BadRequest, match="do not apply to a queue group"):
            queue_options({"path": "/d", "topic": "t", "group": "g", extra: "1"})
    with pytest.raises(InvalidName):
        queue_options({"path": "/d", "topic": "t"})


def test_write_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = write_options({"url": "http://h:1", "topic": "t", "outageWaitMs": "5000"})
    assert (options.url, options.path, options.topic, options.outage_wait_ms) == (
        "http://h:1",
        None,
        "t",
        5000,
    )
    assert write_options({"path": "/d", "topic": "t"}).path == "/d"
    assert write_options({"path": "/d", "topic": "t"}).outage_wait_ms == 120_000
    with pytest.raises(BadRequest, match="through the broker"):
        write_options({"url": "s3://b/p", "topic": "t"})
    with pytest.raises(BadRequest, match="outageWaitMs"):
        write_options({"path": "/d", "topic": "t", "outage_wait_ms": "soon"})


def test_an_api_key_never_travels_as_an_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(BadRequest, match="BROOK_API_KEY") as refused:
        write_options({"url": "http://h:1", "topic": "t", "api_key": "secret-key"})
    assert "secret-key" not in str(refused.value)
    monkeypatch.setenv("BROOK_API_KEY", "from-env")
    assert write_options({"url": "http://h:1", "topic": "t"}).api_key() == "from-env"
    (tmp_path / "key").write_text("from-file\n")
    options = write_options(
        {"url": "http://h:1", "topic": "t", "apiKeyFile": str(tmp_path / "key")}
    )
    assert options.api_key() == "from-file"
    missing = write_options({"url": "http://h:1", "topic": "t", "apiKeyFile": "/no/such/key"})
    with pytest.raises(BadRequest, match="apiKeyFile /no/such/key cannot be read"):
        missing.api_key()


@pytest.mark.parametrize(
    "text", ["soon", "[]", "{}", '{"a": 1}', '{"0": -3}', '{"0": 1.5}', '{"0": "1"}']
)
def test_bad_offsets(text: str) -> None:
    with pytest.raises(BadRequest):
        parse_offsets(text)


def test_resolve_fills_partitions_left_out() -> None:
    bounds = {0: (5, 10), 1: (0, 3)}
    assert resolve("earliest", bounds, "latest", "x") == {0: 5, 1: 0}
    assert resolve({0: -1}, bounds, "earliest", "x") == {0: 10, 1: 0}
    assert resolve({1: 2}, bounds, "latest", "x") == {0: 10, 1: 2}


@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1000), st.integers(0, 1000)), min_size=1),
    st.integers(1, 2000),
)
def test_admission_control_reads_at_most_the_limit_and_always_progresses(
    parts: list[tuple[int, int, int]], most: int
) -> None:
    bounds = {p: (earliest, earliest + a + b) for p, (earliest, a, b) in enumerate(parts)}
    begin = {p: earliest + a for p, (earliest, a, _) in enumerate(parts)}
    end = {p: hi for p, (_, hi) in bounds.items()}
    got = allot(begin, end, bounds, most)
    taken = {p: got[p] - begin[p] for p in got}
    assert all(0 <= taken[p] <= end[p] - begin[p] for p in got)
    waiting = sum(end[p] - begin[p] for p in end)
    assert sum(taken.values()) == min(most, waiting)
