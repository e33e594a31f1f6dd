"""kill -9 while the lake is being written: the manifest names whole files only, and the
next writer brings the lake level with the log (BROOK_LAKE_CRASH_KILLS kills; 3 here,
more in `make reliability`)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import brook
from tests.lake.outside import Outside
from tests.lake.test_lake import source_rows
from tests.s3server import MotoServer
from tests.waiting import wait_for

KILLS = int(os.environ.get("BROOK_LAKE_CRASH_KILLS", "3"))
SEED = int(os.environ.get("BROOK_SEED", str(random.randrange(2**32))))

WRITER = """
import json, sys, brook
b = brook.open(sys.argv[1], lake=True, lake_lag_ms=0, segment_bytes_max=16384,
               **json.loads(sys.argv[2]))
t = b.topic("crash")
q = b.queue("crash", "workers")
i = 0
while True:
    t.append_many([brook.Record(value=b"v%d-%d" % (i, j) * 20, key=b"k%d" % (j % 5))
                   for j in range(50)])
    q.ack(q.lease(max_records=30, timeout=0))  # a history to write as well
    i += 1
    if i % 7 == 0:
        b.lake_sync()
    if i == 3:
        print("writing", flush=True)
"""


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if request.param == "local":
        return {"location": str(tmp_path / "data")}
    moto: MotoServer = request.getfixturevalue("moto")
    # A killed owner's lease is live for seconds: the next one takes the prefix over.
    return {"location": moto.fresh_url(), "endpoint_url": moto.endpoint, "take_over": True}


def check_manifest_names_whole_files(outside: Outside) -> int:
    ends: dict[int, int] = {}
    files = outside.files("crash")
    for file in files:
        assert file.first >= ends.get(file.partition, 0), "files overlap"
        ends[file.partition] = file.next
        assert outside.table(file.name).num_rows == file.rows
    return len(files)


@pytest.mark.crash
def test_a_crash_at_any_step_of_writing_the_lake_leaves_whole_files(where: dict[str, Any]) -> None:
    print(f"BROOK_SEED={SEED}")
    rng = random.Random(SEED)
    options = {k: v for k, v in where.items() if k != "location"}
    outside = Outside(where)
    named = 0
    for life in range(KILLS):
        process = subprocess.Popen(
            [sys.executable, "-c", WRITER, where["location"], json.dumps(options)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None and process.stdout.readline() == "writing\n"
            if life == KILLS - 1:  # the earlier lives may all die before their first file
                wait_for(lambda: outside.files("crash"), 60, "a lake file before the last kill")
            time.sleep(rng.uniform(0.2, 1.5))
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
        named = check_manifest_names_whole_files(outside)
    assert named > 0, "the lake was never written before the kills"
    with brook.open(where["location"], lake=True, **options) as b:
        b.lake_sync()
        assert Counter(outside.rows("crash")) == Counter(source_rows(b, "crash"))
        listed = [n for n in outside.listing("crash") if n.endswith(".parquet")]
        manifest = outside.manifest("crash")
        known = {f["name"] for f in manifest["files"]} | {r["name"] for r in manifest["retired"]}
        assert set(listed) <= known, "a file no manifest names outlived the next writer"
        history = outside.history("crash", "workers")
        rows = Counter(
            (r["log_offset"], r["partition"], r["offset"], r["state"], r["attempt"])
            for r in history
        )
        assert all(n == 1 for n in rows.values()), "a transition is in the history twice"
        acked = Counter((r["partition"], r["offset"]) for r in history if r["state"] == "acked")
        assert all(n == 1 for n in acked.values())
        assert sum(acked.values()) == b.queue("crash", "workers").stats()["acked"] > 0
        leased = {(r["partition"], r["offset"]) for r in history if r["state"] == "leased"}
        assert set(acked) <= leased, "an ack in the history without its lease"
