"""kill -9 while the lake is being written: the manifest names whole files only, and the
next writer brings the lake level with the log (BROOK_LAKE_CRASH_KILLS kills; 3 here,
more in `make reliability`)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import brook
from brook import layout
from brook.lake import manifest as manifests
from tests.lake.test_lake import lake_rows, source_rows

KILLS = int(os.environ.get("BROOK_LAKE_CRASH_KILLS", "3"))
SEED = int(os.environ.get("BROOK_SEED", str(random.randrange(2**32))))

WRITER = """
import sys, brook
b = brook.open(sys.argv[1], lake=True, lake_lag_ms=0, segment_bytes_max=16384)
t = b.topic("crash")
i = 0
while True:
    t.append_many([brook.Record(value=b"v%d-%d" % (i, j) * 20, key=b"k%d" % (j % 5))
                   for j in range(50)])
    i += 1
    if i % 7 == 0:
        b.lake_sync()
    if i == 3:
        print("writing", flush=True)
"""


def check_manifest_names_whole_files(data: Path) -> int:
    path = data / layout.lake_manifest("crash")
    manifest = manifests.decode(path.read_bytes() if path.exists() else None)
    ends: dict[int, int] = {}
    for file in manifest.files:
        assert file.first >= ends.get(file.partition, 0), "files overlap"
        ends[file.partition] = file.next
        table = pq.read_table(pa.BufferReader((data / file.name).read_bytes()))
        assert table.num_rows == file.rows
    return len(manifest.files)


@pytest.mark.crash
def test_a_crash_at_any_step_of_writing_the_lake_leaves_whole_files(tmp_path: Path) -> None:
    print(f"BROOK_SEED={SEED}")
    rng = random.Random(SEED)
    data = tmp_path / "data"
    named = 0
    for _ in range(KILLS):
        process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(data)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert process.stdout is not None and process.stdout.readline() == "writing\n"
            time.sleep(rng.uniform(0.2, 1.5))
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
        named = check_manifest_names_whole_files(data)
    assert named > 0, "the lake was never written before the kills"
    with brook.open(data, lake=True) as b:
        b.lake_sync()
        assert Counter(lake_rows(b.storage, "crash")) == Counter(source_rows(b, "crash"))
        listed = [n for n in b.storage.list(layout.lake_topic("crash")) if n.endswith(".parquet")]
        known = manifests.decode(b.storage.read_all(layout.lake_manifest("crash"))).names()
        assert set(listed) <= known, "a file no manifest names outlived the next writer"
