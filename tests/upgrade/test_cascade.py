"""A data directory caught in the dead-letter cascade of the Brook before names were
reserved (cascade/, written by make_cascade_fixture.py with that Brook) opens, serves
every record it held, and cascades no further: its `.dlq` topics keep working."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import brook
from brook import limits, names
from tests.delivery.receivers import Answer, Receiver, wait_for

HERE = Path(__file__).parent / "cascade"
SETTLE_S = 3.0
"""Longer than a reconcile and a few attempts: a cascade would go on meanwhile."""


def test_a_directory_caught_in_the_old_cascade_serves_and_cascades_no_further(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    shutil.copytree(HERE / "data", data)
    expected = json.loads((HERE / "expected.json").read_text())["topics"]
    with (
        brook.open(str(data), delivery_allow_private_networks=True) as b,
        Receiver(lambda got: Answer(400)) as refusing,
        Receiver() as healthy,
    ):
        found = {info.name: info.end_offsets for info in b.topics()}
        assert {
            name: {str(p): n for p, n in ends.items()} for name, ends in found.items()
        } == expected
        for name in expected:
            assert b.topic(name).read(0, 0)[0].value == b"the first record", name
        for endpoint in ("a", "b"):
            b.create_endpoint(endpoint, refusing.url, enabled=True)
        b.create_endpoint("c", healthy.url, enabled=True)
        b.topic("x.1").append_many([brook.Record(b"new %d" % n) for n in range(10)])
        wait_for(lambda: sum(g.body.startswith(b"new") for g in healthy.requests()) == 10, 30)
        time.sleep(SETTLE_S)
        settled = {info.name for info in b.topics()}
        time.sleep(SETTLE_S)
        assert {info.name for info in b.topics()} == settled, "the topics stopped growing"
        assert all(
            names.NAME.fullmatch(t) and len(t) <= limits.topic_name_chars_max for t in settled
        )
        made = settled - set(expected)
        assert len(made) <= len(expected), f"at most one more level: {sorted(made)}"
        assert not b.supervisor.failing()
        assert b.endpoint("c").stats().failing == ""
