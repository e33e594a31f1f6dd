"""A child process for tests/staging: stages, says READY, publishes, then says DONE.

Usage: publisher.py DATA WRITER SEQ CHUNKS ROWS_PER_CHUNK. Its rows are those
of tests.staging.test_resume.staged_rows, so the test knows what to expect.
"""

from __future__ import annotations

import sys

import brook
from tests.staging.test_resume import PARTITIONS, staged_rows


def main() -> None:
    data, writer, seq, chunks, per_chunk = sys.argv[1:6]
    with brook.open(data, linger_ms=0) as b:
        b.create_topic("out", partitions=PARTITIONS)
        t = b.topic("out")
        for chunk, records in enumerate(staged_rows(int(chunks), int(per_chunk))):
            t.stage(writer, int(seq), "part", chunk, records)
        print("READY", flush=True)
        t.publish(writer, int(seq), {"part": int(chunks)})
        print("DONE", flush=True)


if __name__ == "__main__":
    main()
