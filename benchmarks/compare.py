"""Two versions of Brook, the same scenarios, alternately: does a change cost anything?

    python -m benchmarks.compare OLD_COMMIT [ALTERNATIONS] [SCENARIO ...]
    python -m benchmarks.compare pure [ALTERNATIONS] [SCENARIO ...]

Checks OLD_COMMIT out into a git worktree, then runs each scenario in a fresh
process for the old code and for this checkout in turn, ALTERNATIONS times (3 by
default), so both see the same machine in the same minutes. The benchmark code
is this checkout's for both; only `brook` differs (PYTHONPATH, inherited by the
`brook serve` the server scenarios start). Prints a Markdown table of medians.

An old commit's worktree has no compiled modules, so it runs as Python; `pure` in
its place compares this checkout run as Python (BROOK_PURE=1) with it compiled.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parents[1]

SCENARIOS = {
    "read": ("sequential read, 100-byte records (records/s)", "run.brook_sequential_read()"),
    "threads": (
        "64 threads x append of one 1 KB record (records/s)",
        "run.brook_threads_single_append()",
    ),
    "append_many": ("append_many 1,000 x 1 KB, durable (MB/s)", "run.brook_append_many()"),
    "produce_consume": (
        "1 producer + 1 stream group polling, 1 KB (MB/s)",
        "run.brook_produce_and_consume()",
    ),
    "http_single": (
        "HTTP, one 1 KB record per request, 64 connections (req/s)",
        "server.single_records({})",
    ),
    "http_json32": (
        "HTTP, JSON batches of 32 x 1 KB, 64 connections (records/s)",
        "server.json_batches(32, 64)",
    ),
    "http_json32_b64": (
        "HTTP, JSON batches of 32 x 1 KB as value_b64, 64 connections (records/s)",
        "server.json_batches(32, 64, b64=True)",
    ),
    "http_json_read": (
        "HTTP, JSON reads in pages of 1,000 (records/s)",
        "server.json_reads()",
    ),
    "queue_embedded": ("queue lease + ack, embedded (jobs/s)", "queues.embedded()[0]"),
    "queue_served": ("queue lease + ack through the server (jobs/s)", "queues.served()"),
    "timers": ("timers scheduled in batches of 10,000 (timers/s)", "timers.schedule_rate()[0]"),
    "delivery": ("delivery to one fast endpoint (deliveries/s)", "delivery.throughput()"),
    "delivery_workers": (
        "delivery to one fast endpoint, 1 worker process (deliveries/s)",
        "delivery.throughput(1)",
    ),
    "fan_out": (
        "delivery to 1,000 endpoints of one topic (deliveries/s)",
        "tenants.fan_out(1000)['deliveries_per_s']",
    ),
}


def measure(source: Path, expression: str, pure: bool = False) -> float:
    """One trial in a fresh process, with `brook` imported from `source` (as Python
    throughout when `pure`)."""
    env = dict(os.environ, PYTHONPATH=f"{source}:{ROOT}")
    env.pop("BROOK_PURE", None)
    if pure:
        env["BROOK_PURE"] = "1"
    code = (
        "from benchmarks import delivery, queues, run, server, tenants, timers\n"
        f"print('RESULT', float({expression}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout
    line = next(line for line in out.splitlines() if line.startswith("RESULT "))
    return float(line.split()[1])


def main(old: str, alternations: int, names: list[str]) -> str:
    needs_wrk = any(SCENARIOS[n][1].startswith("server.") for n in names)
    if needs_wrk and shutil.which("wrk") is None:
        sys.exit("the HTTP scenarios need wrk: apt-get install wrk (make bench installs it)")
    tree = None if old == "pure" else Path(tempfile.mkdtemp(prefix="brook-old-"))
    if tree is not None:
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), old], cwd=ROOT, check=True)
    try:
        sides = {
            "before": (ROOT / "src", True) if tree is None else (tree / "src", False),
            "after": (ROOT / "src", False),
        }
        results: dict[str, dict[str, list[float]]] = {n: {"before": [], "after": []} for n in names}
        for _ in range(alternations):
            for name in names:
                for side, (source, pure) in sides.items():
                    value = measure(source, SCENARIOS[name][1], pure)
                    results[name][side].append(value)
                    print(f"{name} {side}: {value:,.1f}", file=sys.stderr, flush=True)
    finally:
        if tree is not None:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True
            )
    lines = ["| scenario | before | after | after / before |", "| --- | ---: | ---: | ---: |"]
    for name in names:
        before = statistics.median(results[name]["before"])
        after = statistics.median(results[name]["after"])
        lines.append(
            f"| {SCENARIOS[name][0]} | {before:,.0f} | {after:,.0f} | {after / before:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m benchmarks.compare OLD_COMMIT [ALTERNATIONS] [SCENARIO ...]")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    chosen = sys.argv[3:] or list(SCENARIOS)
    print(main(sys.argv[1], count, chosen))
