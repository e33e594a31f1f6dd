"""Every Brook opens every older format's data directory and serves the same records.

`format<N>/data` was written by the Brook that introduced format N
(make_fixture.py) and is committed; `format<N>/expected.json` says what it
holds. Each test works on a copy (opening recovers and may write). A location
in a newer format than this Brook's is refused, never read by guessing.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.errors import IncompatibleFormat
from brook.storage_format import FORMAT
from tests.environment import unmeasured

HERE = Path(__file__).parent
FIXTURES = sorted(HERE.glob("format*/expected.json"))


def test_there_is_a_fixture_for_every_format() -> None:
    assert [int(p.parent.name.removeprefix("format")) for p in FIXTURES] == list(
        range(1, FORMAT + 1)
    )


def copied(fixture: Path, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    data = tmp_path / "data"
    shutil.copytree(fixture.parent / "data", data)
    return data, json.loads(fixture.read_text())


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def check_records(b: brook.Broker, expected: dict[str, Any]) -> None:
    names = {info.name: info.partitions for info in b.topics()}
    assert names == {name: t["partitions"] for name, t in expected["topics"].items()}
    for name, topic in expected["topics"].items():
        for partition, records in topic["records"].items():
            stored = b.topic(name).read(int(partition), 0, 100_000)
            assert len(stored) == len(records), f"{name}/{partition}"
            for r, want in zip(stored, records, strict=True):
                assert r.offset == want["offset"]
                assert r.timestamp == want["timestamp"]
                assert r.key == unb64(want["key"])
                assert r.value == unb64(want["value"])
                assert (r.headers or {}) == {k: unb64(v) for k, v in want["headers"].items()}


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.parent.name for p in FIXTURES])
def test_an_older_format_opens_and_serves_the_same_state(fixture: Path, tmp_path: Path) -> None:
    data, expected = copied(fixture, tmp_path)
    with brook.open(str(data)) as b:
        check_records(b, expected)
        idem = expected["idempotency"]
        [paid] = b.topic(idem["topic"]).read(idem["partition"], idem["offset"], 1)
        assert paid.value == b"paid once"

        group = expected["group"]
        lag = b.consumer(group["topic"], group["group"]).lag()
        assert {str(p): n for p, n in lag.items()} == group["lag"]

        queue = expected["queue"]
        stats = b.queue(queue["topic"], queue["group"]).stats()
        for state in ("acked", "dead", "leased"):
            assert stats[state] == queue["stats"][state], state
        waiting = queue["stats"]["ready"] + queue["stats"]["retrying"]
        assert stats["ready"] + stats["retrying"] == waiting
        settings = b.queue(queue["topic"], queue["group"]).settings()
        assert settings["max_attempts"] == queue["max_attempts"]

        for timer_id, state in expected["timers"].items():
            info = b.timer(timer_id)
            assert info is not None and info.state == state, timer_id

        want = expected["endpoint"]
        [endpoint] = b.endpoints()
        assert endpoint.name == want["name"] and endpoint.url == want["url"]
        assert list(endpoint.topics) == want["topics"]
        assert endpoint.enabled is want["enabled"]
        assert endpoint.max_attempts == want["max_attempts"]

        # And it takes new writes where the old ones end.
        ends = b.topic("events").end_offsets()
        ack = b.topic("events").append(b"written by this Brook")
        assert ack.offset == ends[0]
    with brook.open(str(data), read_only=True) as b:
        written_here = b.topic("events").read(0, ends[0], 10)
        assert [r.value for r in written_here] == [b"written by this Brook"]


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.parent.name for p in FIXTURES])
def test_a_reader_opens_an_older_format_without_writing(fixture: Path, tmp_path: Path) -> None:
    data, expected = copied(fixture, tmp_path)
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    # A reader reads the write-ahead log too (in memory): beside a crashed owner it
    # sees every record the owner acknowledged, the WAL's alone included (format 2).
    with brook.open(str(data), read_only=True) as b:
        check_records(b, expected)
    after = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    assert after == before


def test_a_location_without_a_format_file_is_format_1(tmp_path: Path) -> None:
    data, expected = copied(HERE / "format1" / "expected.json", tmp_path)
    (data / "format.json").unlink()
    with brook.open(str(data), read_only=True) as b:
        check_records(b, expected)
    assert not (data / "format.json").exists(), "a reader wrote"
    with brook.open(str(data)) as b:
        check_records(b, expected)
    # An owner gives it the file, upgraded in place to this Brook's format.
    assert json.loads((data / "format.json").read_text()) == {"brook_format": FORMAT}


@pytest.mark.parametrize("written", [b'{"brook_format": 99}', b"{not json", b'{"brook_format": 0}'])
def test_a_newer_or_unknown_format_is_refused_and_left_alone(
    tmp_path: Path, written: bytes
) -> None:
    data, _ = copied(HERE / "format1" / "expected.json", tmp_path)
    (data / "format.json").write_bytes(written)
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    for read_only in (False, True):
        with pytest.raises(IncompatibleFormat, match="format"):
            brook.open(str(data), read_only=read_only)
    after = {p: p.read_bytes() for p in data.rglob("*") if p.is_file() and p.name != "LOCK"}
    assert after == {p: v for p, v in before.items() if p.name != "LOCK"}
    cli = subprocess.run(
        [sys.executable, "-m", "brook.cli", "topics", "list", "--data", str(data)],
        capture_output=True,
        text=True,
        env={**unmeasured(), "PYTHONPATH": str(HERE.parents[1] / "src")},
    )
    assert cli.returncode != 0
    lines = cli.stderr.strip().splitlines()
    assert len(lines) == 1 and "format" in lines[0], cli.stderr
