"""The outside fuzzer's run (`make fuzz-api SEEDS=1,7`, part of `make reliability`):
schemathesis's own command line, every phase (examples, coverage, fuzzing, stateful),
against a plain `brook serve` on a fresh folder per seed, as an outside tester runs it.

It must find no server error: a 5xx answer (not even a documented 503: nothing here
fills a disk or an inflight budget), a dropped connection or a broker that stops
serving. Its other checks (schema conformance, rejected-but-valid requests) are
printed for reading; a long-poll capped at 30 s is not a failure, so the request
timeout sits above the cap.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.served import Served

ST = str(Path(sys.executable).with_name("st"))
REQUEST_TIMEOUT_S = 45
"""Above the longest wait a request may ask (`wait_ms` is capped at 30 s)."""


def fuzz(seed: int, max_time_s: int, folder: Path) -> bool:
    """One seed's run; True when it found no server error."""
    served = Served(folder / "data")
    try:
        command = [
            ST, "run", f"http://127.0.0.1:{served.port}/openapi.json",
            "--checks", "not_a_server_error",
            "--seed", str(seed),
            "--phases", "examples,coverage,fuzzing,stateful",
            "--max-time", str(max_time_s),
            "--request-timeout", str(REQUEST_TIMEOUT_S),
            "--workers", "1",
            "--report", "ndjson", "--report-dir", str(folder / "report"),
        ]  # fmt: skip
        with (folder / "schemathesis.txt").open("wb") as out:
            code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode
        exit_code = served.process.poll()
    finally:
        served.close()
        (folder / "broker.log").write_text("\n".join(served.log))
    alive = exit_code is None
    text = (folder / "schemathesis.txt").read_text(errors="replace")
    summary = [line for line in text.splitlines() if line.startswith("=")][-1:]
    print(f"seed {seed}: {'no server error' if code == 0 and alive else 'FAILED'} "
          f"{' '.join(summary)} (output in {folder})")  # fmt: skip
    if code != 0 or not alive:
        print(text[-6000:])
        if not alive:
            print(f"the broker stopped serving (exit {exit_code}): see {folder}/broker.log")
    return code == 0 and alive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", default=os.environ.get("SEEDS", "1,7"))
    parser.add_argument("--max-time", type=int, default=int(os.environ.get("MAX_TIME_S", "300")))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    passed = []
    for seed in seeds:
        folder = Path(tempfile.mkdtemp(prefix=f"brook-schemathesis-{seed}-"))
        ok = fuzz(seed, args.max_time, folder)
        passed.append(ok)
        if ok:
            shutil.rmtree(folder / "data", ignore_errors=True)
    if not all(passed):
        failed = [s for s, ok in zip(seeds, passed, strict=True) if not ok]
        raise SystemExit(f"schemathesis found server errors with seed(s) {failed}")


if __name__ == "__main__":
    main()
