"""One parser for storage locations, used by brook.open, the Spark readers and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import brook
from brook.errors import BadRequest, NotFound
from brook.storage import location as locations
from brook.storage.location import Location, open_reader, parse

PLAIN_PATHS = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1
).filter(lambda s: "://" not in s and s.strip())


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("./brook-data", Location("local", "./brook-data")),
        ("/var/lib/brook", Location("local", "/var/lib/brook")),
        ("file:///var/lib/brook", Location("local", "/var/lib/brook")),
        ("s3://bucket", Location("s3", "s3://bucket")),
        ("s3://bucket/a/prefix", Location("s3", "s3://bucket/a/prefix")),
        ("memory://", Location("memory", "")),
    ],
)
def test_each_form_is_understood(given: str, expected: Location) -> None:
    assert parse(given) == expected


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("", "a directory path, file://DIR, s3://bucket/prefix or memory://"),
        ("   ", "a directory path"),
        (None, "a directory path"),
        ("s3://", "names no bucket"),
        ("s3:///prefix", "names no bucket"),
        ("file://", "names no directory"),
        ("ftp://host/x", "unsupported storage 'ftp://host/x'"),
        ("memory://x", "unsupported storage"),
    ],
)
def test_a_bad_location_says_what_is_accepted(given: object, says: str) -> None:
    with pytest.raises(BadRequest, match=says.replace(".", r"\.").replace("?", r"\?")):
        parse(given)


@given(PLAIN_PATHS)
def test_any_path_without_a_scheme_is_a_directory(path: str) -> None:
    assert parse(path) == Location("local", path)
    assert parse("file://" + path) == Location("local", path)


def test_options_of_another_kind_of_storage_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="take_over applies to s3:// storage only"):
        brook.open(str(tmp_path), take_over=True)
    with pytest.raises(BadRequest, match="endpoint_url applies to s3:// storage only"):
        brook.open(str(tmp_path), endpoint_url="http://127.0.0.1:9")
    for elsewhere in ("memory://", "s3://bucket/prefix"):
        with pytest.raises(BadRequest, match="preallocate_bytes applies to a directory only"):
            brook.open(elsewhere, preallocate_bytes=1 << 20)
    options = {"endpoint_url": None, "linger_ms": 1}
    assert locations.split_options(parse(str(tmp_path)), options) == {}
    assert options == {"linger_ms": 1}, "unset S3 options are dropped, the broker's kept"


def test_every_entry_point_refuses_the_same_location_the_same_way(tmp_path: Path) -> None:
    from brook.spark.options import read_options

    with pytest.raises(BadRequest, match="unsupported storage 'ftp://x'") as opened:
        brook.open("ftp://x")
    with pytest.raises(BadRequest, match="unsupported storage 'ftp://x'") as read:
        open_reader("ftp://x")
    assert str(opened.value) == str(read.value)
    with pytest.raises(BadRequest, match='"path" is a directory'):
        read_options({"path": "ftp://x", "topic": "t"}, streaming=False)
    with pytest.raises(NotFound, match="no Brook data at"):
        brook.open(str(tmp_path / "missing"), read_only=True)
    with pytest.raises(BadRequest, match="cannot be read from outside"):
        open_reader("memory://")
