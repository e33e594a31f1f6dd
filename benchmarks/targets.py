"""The performance targets (issues 20 and 37), each row beside its baseline, in one run.

    python -m benchmarks.targets [ROW ...]        (all rows by default; `make bench` runs all)

Every row and its baseline run TRIALS times, alternately, each trial in a fresh
process (a fresh `brook serve` and data directory where there is one); medians
are reported and ratios are taken between the medians of this run. The table is
appended to benchmarks/RESULTS.md (by `make bench` when it runs this module with
the others). The scenarios are the other benchmark modules' own; this module only
chooses them, runs them side by side and writes the table.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.run import machine

ROOT = Path(__file__).parents[1]
TRIALS = int(os.environ.get("BROOK_BENCH_TRIALS", "3"))
MOTO = (
    "import os\nfrom tests.s3server import CREDENTIALS, MotoServer\n"
    "os.environ.update(CREDENTIALS)\nmoto = MotoServer()\n"
)


@dataclass(frozen=True)
class Row:
    title: str
    measure: str
    """A Python expression (after `setup`) whose value is the figure."""
    unit: str
    target: str
    baseline: str = ""
    """The baseline's expression ("" for none), measured beside the row."""
    baseline_title: str = ""
    setup: str = ""
    teardown: str = ""


ROWS = {
    "http_single": Row(
        "HTTP, one durable 1 KB record per request, 64 connections",
        "server.single_records({})",
        "req/s",
        ">= 0.6x the no-op stack (issue 37; issue 20: 0.45x)",
        "server.stack_ceiling()",
        "Brook's HTTP stack with a handler that does nothing",
    ),
    "http_single_raw": Row(
        "HTTP, one durable 1 KB record per request, against a bare uvloop protocol",
        "server.single_records({})",
        "req/s",
        ">= 0.25x a raw uvloop no-op (issue 37)",
        "server.stack_ceiling('benchmarks.raw_server')",
        "a bare uvloop protocol that answers at once",
    ),
    "http_json32": Row(
        "HTTP, JSON batches of 32 x 1 KB text values, 64 connections",
        "server.json_batches(32, 64)",
        "records/s",
        ">= 350,000 (issue 37; issue 20: 150,000)",
        "server.batches(32, 64)",
        "the same records as binary batches",
    ),
    "http_json32_b64": Row(
        "HTTP, JSON batches of 32 x 1 KB as value_b64, 64 connections",
        "server.json_batches(32, 64, b64=True)",
        "records/s",
        ">= 200,000 (issue 37)",
    ),
    "http_binary32": Row(
        "HTTP, binary batches of 32 x 1 KB, 64 connections",
        "server.batches(32, 64)",
        "records/s",
        ">= 200,000",
    ),
    "queue_served": Row(
        "queue lease + ack through the server, 16 workers, 100 at a time",
        "queues.served()",
        "jobs/s",
        ">= 40,000",
        "queues.embedded()[0]",
        "the same work on an embedded broker (8 threads)",
    ),
    "threads": Row(
        "embedded, 64 threads x one 1 KB record per call",
        "run.brook_threads_single_append()",
        "records/s",
        ">= 0.6x the ceiling",
        "run.thread_handoff_ceiling()",
        "64 Python threads handing a token to a waker and back, no I/O",
    ),
    "s3_producers": Row(
        "S3 (moto on loopback), 64 single-record producers, linger 10 ms",
        "s3.producers_on_s3(moto, 10.0)",
        "records/s (PUTs / 1,000)",
        ">= 10,000 at <= 17 PUTs / 1,000",
        setup=MOTO,
        teardown="moto.close()",
    ),
    "s3_cold_start": Row(
        "S3 cold start: 10,000 syncs written, empty disk, open to first read",
        "s3.cold_start(moto)",
        "s (requests)",
        "<= 0.5 s, <= 50 requests",
        setup=MOTO,
        teardown="moto.close()",
    ),
    "spark_sink": Row(
        "Spark sink through `brook serve`, 1,000,000 rows, local[2]",
        "spark.sink_row()",
        "rows/s (first write of a session)",
        ">= 400,000",
    ),
    "delivery": Row(
        "delivery to one fast endpoint",
        "delivery.throughput()",
        "deliveries/s",
        ">= 10,000 (issue 37; issue 20: 5,000)",
        "delivery.queue_baseline()",
        "the endpoint's queue group leased and acked by 16 threads",
    ),
    "fan_out": Row(
        "delivery to 1,000 endpoints of one topic",
        "tenants.fan_out(1000)['deliveries_per_s']",
        "deliveries/s",
        ">= 0.8x one endpoint (issue 37)",
        "delivery.throughput()",
        "delivery to one fast endpoint",
    ),
}


def measure(row: Row, expression: str) -> tuple[float, ...]:
    """One trial in a fresh process: the expression's value (a number or a tuple)."""
    code = (
        "from benchmarks import run, server, queues, s3, delivery, spark, tenants\n"
        f"{row.setup}"
        f"try:\n    value = {expression}\nfinally:\n    {row.teardown or 'pass'}\n"
        "print('RESULT', *(value if isinstance(value, tuple) else (value,)))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    found = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not found:
        raise RuntimeError(f"{expression} failed:\n{done.stderr[-3000:]}")
    return tuple(float(v) for v in found[0].split()[1:])


def _shown(values: tuple[float, ...], unit: str) -> str:
    if unit.startswith("s "):
        return f"{values[0]:.2f} s ({values[-1]:.0f} requests)"
    if "PUTs" in unit:
        return f"{values[0]:,.0f} ({values[1]:.1f} PUTs / 1,000)"
    if "first write" in unit:
        return f"{values[0]:,.0f} ({values[1]:,.0f})"
    return f"{values[0]:,.0f}"


def main(names: list[str] | None = None) -> str:
    """The table of `names` (every row by default), measured now."""
    names = names or list(ROWS)
    load = os.getloadavg()[0]
    results: dict[str, dict[str, list[tuple[float, ...]]]] = {
        n: {"row": [], "baseline": []} for n in names
    }
    for trial in range(TRIALS):
        for name in names:
            row = ROWS[name]
            sides = [("row", row.measure)] + ([("baseline", row.baseline)] if row.baseline else [])
            for side, expression in sides:
                value = measure(row, expression)
                results[name][side].append(value)
                print(f"{name} {side} trial {trial + 1}: {value}", file=sys.stderr, flush=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Performance targets (issues 20 and 37) — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load:.2f}, after "
        f"{os.getloadavg()[0]:.2f}. `python -m benchmarks.targets`: every row and its "
        f"baseline {TRIALS} times, alternately, each in a fresh process; medians.",
        "- Durable throughout: every ack follows an fdatasync (or S3's 200 OK).",
        "",
        "| path | median | trials | target | baseline (median) | ratio |",
        "| --- | ---: | --- | --- | --- | ---: |",
    ]
    for name in names:
        row = ROWS[name]
        trials = results[name]["row"]
        median = _median(trials)
        cells = ", ".join(_shown(t, row.unit) for t in trials)
        base, ratio = "", ""
        if row.baseline:
            base_median = _median(results[name]["baseline"])
            base = f"{row.baseline_title}: {base_median[0]:,.0f}"
            ratio = f"{median[0] / base_median[0]:.2f}x"
        lines.append(
            f"| {row.title} ({row.unit}) | {_shown(median, row.unit)} | {cells} | "
            f"{row.target} | {base} | {ratio} |"
        )
    return "\n".join(lines) + "\n"


def _median(trials: list[tuple[float, ...]]) -> tuple[float, ...]:
    """The trial whose first figure is the median (its other figures with it)."""
    ordered = sorted(trials, key=lambda t: t[0])
    return ordered[len(ordered) // 2]


if __name__ == "__main__":
    chosen = sys.argv[1:] or list(ROWS)
    unknown = [n for n in chosen if n not in ROWS]
    if unknown:
        sys.exit(f"unknown row(s) {unknown}: choose from {', '.join(ROWS)}")
    table = main(chosen)
    print(table)
    with (ROOT / "benchmarks" / "RESULTS.md").open("a") as results:
        results.write("\n" + table)
