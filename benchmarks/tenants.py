"""Many tenants on one broker (SPEC §11): what an endpoint and a topic cost.

- Fan-out: one topic, N endpoints (1 to 10,000) on one fast receiver (a
  benchmarks/null_server.py process); the same 50,000 deliveries spread over them, by
  an embedded broker in a child whose descriptor limit is 1,024 (soft and hard).
  Deliveries/s against one endpoint's pace in the same run, the time to create the
  endpoints, and the broker's descriptors and resident memory.
- Topics: 1,000 to 100,000 topics of one record each, made through the embedded
  broker in a child process whose descriptor limit is 1,024 (soft and hard), then
  opened again by another (a restart): create rate, resident memory, descriptors,
  restart time.
  On local disk, and on S3 (moto's server over loopback) where the restart is a cold
  start on an empty cache (a fresh machine).

Run alone with `python -m benchmarks.tenants` (appends to RESULTS.md and draws
docs/tenants.png), or as part of `make bench`. BROOK_BENCH_TENANTS_SMALL=1 runs
each scenario at a tenth of its size (for trying it out).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import brook
from benchmarks.delivery import receiver
from benchmarks.run import machine, scratch
from benchmarks.server import stop

SMALL = os.environ.get("BROOK_BENCH_TENANTS_SMALL") == "1"
DELIVERIES = 5_000 if SMALL else 50_000
ENDPOINT_COUNTS = [1, 10, 100, 1_000] if SMALL else [1, 10, 100, 1_000, 10_000]
TOPIC_COUNTS_LOCAL = [1_000, 10_000] if SMALL else [1_000, 10_000, 100_000]
TOPIC_COUNTS_S3 = [100, 1_000] if SMALL else [1_000, 10_000]
OPEN_FILES = 1_024
TRIALS = int(os.environ.get("BROOK_BENCH_TENANTS_TRIALS", "1" if SMALL else "3"))
PNG = Path(__file__).parents[1] / "docs" / "tenants.png"


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


# ---------------------------------------------------------------- fan-out


DELIVERY_WORKERS = int(os.environ.get("BROOK_BENCH_DELIVERY_WORKERS", "0"))
"""Delivery worker processes of the fan-out's broker (0: its own loop sends)."""


def fan_out(endpoints: int) -> dict[str, float]:
    """`fan_out_child` in a child process limited to OPEN_FILES descriptors."""
    return _in_child(["--fan-out", str(endpoints)], f"{endpoints} endpoints")


def fan_out_child(endpoints: int) -> dict[str, float]:
    """DELIVERIES records' deliveries over `endpoints` endpoints of one topic."""
    folder = scratch()
    process, url = receiver()
    records = DELIVERIES // endpoints
    try:
        options = {"delivery_workers": DELIVERY_WORKERS} if DELIVERY_WORKERS else {}
        with brook.open(str(folder / "data"), delivery_allow_private_networks=True, **options) as b:
            b.topic("events").append(b"made")
            started = time.monotonic()
            for n in range(endpoints):
                b.create_endpoint(f"customer-{n}", url, ["events"])
            created_s = time.monotonic() - started
            values = [brook.Record(os.urandom(1024)) for _ in range(min(records, 1_000))]
            started = time.monotonic()
            for at in range(0, records, len(values)):
                b.topic("events").append_many(values[: records - at])
            total = records * endpoints
            lanes = b.delivery.scheduler.lanes
            while sum(lane.stats.attempts.get("ack", 0) for lane in lanes.values()) < total:
                if time.monotonic() - started > 1_800:
                    raise AssertionError(f"{endpoints} endpoints: not delivered in 30 minutes")
                time.sleep(0.2)
            elapsed = time.monotonic() - started
            return {
                "deliveries_per_s": total / elapsed,
                "created_s": created_s,
                "descriptors": float(_descriptors()),
                "rss_mb": _rss_mb(),
            }
    finally:
        stop(process)
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- topics


def create_child(count: int, location: str, options: dict[str, Any]) -> dict[str, float]:
    """In a child limited to OPEN_FILES descriptors: make `count` topics."""
    started = time.monotonic()
    with brook.open(location, **options) as b:
        for n in range(count):
            b.topic(f"tenant-{n}").append(b"first")
        created_s = time.monotonic() - started
        return {
            "create_per_s": count / created_s,
            "rss_mb": _rss_mb(),
            "descriptors": float(_descriptors()),
        }


def restart_child(count: int, location: str, options: dict[str, Any]) -> dict[str, float]:
    """In another child (a restart is a new process): open them again."""
    started = time.monotonic()
    with brook.open(location, **options) as b:
        restart_s = time.monotonic() - started
        assert len(b.topics()) == count
        assert b.topic(f"tenant-{count - 1}").read(0, 0)[0].value == b"first"
        return {"restart_s": restart_s, "restart_rss_mb": _rss_mb()}


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


def topics(
    count: int, s3_endpoint: str | None = None, s3_url: str | None = None
) -> dict[str, float]:
    folder = scratch()
    try:
        if s3_url is None:
            location, options = str(folder / "data"), {}
        else:
            location = s3_url
            options = {"endpoint_url": s3_endpoint, "cache_dir": str(folder / "cache")}
        arguments = [str(count), location, json.dumps(options)]
        made = _in_child(["--create", *arguments], f"{count} topics on {location}")
        if "cache_dir" in options:  # a fresh machine: nothing cached
            shutil.rmtree(options["cache_dir"], ignore_errors=True)
        return {**made, **_in_child(["--restart", *arguments], f"a restart of {count} topics")}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _in_child(arguments: list[str], what: str) -> dict[str, float]:
    """Run this module with `arguments` in a child whose descriptor limit is
    OPEN_FILES (soft and hard, as `ulimit -n` would set it); its last line, as JSON."""
    from tests.s3server import CREDENTIALS

    found = subprocess.run(
        [sys.executable, "-m", "benchmarks.tenants", *arguments],
        capture_output=True,
        text=True,
        preexec_fn=_limit,
        check=False,
        env={**os.environ, **CREDENTIALS},
    )
    if found.returncode != 0:
        raise AssertionError(f"{what}: {found.stderr[-2000:]}")
    result: dict[str, float] = json.loads(found.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------- the report


def _median(trials: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(t[key] for t in trials) for key in trials[0]}


def main() -> str:
    from tests.s3server import MotoServer

    load_before = os.getloadavg()
    fan: dict[int, dict[str, float]] = {}
    for n in ENDPOINT_COUNTS:
        fan[n] = _median([fan_out(n) for _ in range(TRIALS if n <= 1_000 else 1)])
        print(f"fan-out {n}: {fan[n]}", file=sys.stderr, flush=True)
    local = {}
    for n in TOPIC_COUNTS_LOCAL:
        local[n] = _median([topics(n) for _ in range(TRIALS if n <= 1_000 else 1)])
        print(f"topics {n} local: {local[n]}", file=sys.stderr, flush=True)
    moto = MotoServer()
    s3 = {}
    try:
        for n in TOPIC_COUNTS_S3:
            s3[n] = topics(n, moto.endpoint, moto.fresh_url())
            print(f"topics {n} s3: {s3[n]}", file=sys.stderr, flush=True)
    finally:
        moto.close()
    _plot(fan, local, s3)
    one = fan[1]["deliveries_per_s"]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Many tenants: endpoints and topics — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load_before[0]:.2f}, after "
        f"{os.getloadavg()[0]:.2f}.",
        f"- Fan-out: one topic, {DELIVERIES:,} deliveries of 1 KB records spread over N "
        "endpoints (default settings) on one benchmarks/null_server.py receiver; embedded "
        f"broker in a child whose descriptor limit is {OPEN_FILES:,} (soft and hard); every "
        "settlement durable. The baseline is one endpoint, in the same run. "
        f"Medians of {TRIALS} trials up to 1,000 endpoints and 1,000 topics, one run above.",
        f"- Topics: made by the embedded broker in a child whose descriptor limit is "
        f"{OPEN_FILES:,} (soft and hard); one record each; then opened again by another child "
        "(a restart is a new process). On S3 (moto's "
        "server over loopback) the second open is a cold start on an empty cache. "
        "Plot: docs/tenants.png.",
        "",
        "| endpoints | deliveries/s | vs one endpoint | target | created in | descriptors | resident |",
        "| ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    targets = {1_000: ">= 0.8x; created <= 5 s", 10_000: ">= 0.5x"}
    for n, r in fan.items():
        lines.append(
            f"| {n:,} | {r['deliveries_per_s']:,.0f} | {r['deliveries_per_s'] / one:.2f}x | "
            f"{targets.get(n, '')} | {r['created_s']:.1f} s | {r['descriptors']:,.0f} | "
            f"{r['rss_mb']:,.0f} MiB |"
        )
    most = max(fan)
    lines.append(
        f"\nResident memory per endpoint (idle or not, its lane, groups and status logs): "
        f"{(fan[most]['rss_mb'] - fan[1]['rss_mb']) * 1024 / (most - 1):,.1f} KiB "
        f"(1 to {most:,} endpoints)."
    )
    lines += [
        "",
        "| topics | storage | created/s | resident | descriptors | restart | resident after | target |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for kind, results in (("local", local), ("S3 (moto)", s3)):
        for n, r in results.items():
            target = ""
            if kind == "local" and n == 100_000:
                target = "<= 1 GB resident, restart <= 30 s"
            elif kind != "local" and n == 10_000:
                target = "cold start <= 10 s"
            lines.append(
                f"| {n:,} | {kind} | {r['create_per_s']:,.0f} | {r['rss_mb']:,.0f} MiB | "
                f"{r['descriptors']:,.0f} | {r['restart_s']:.1f} s | "
                f"{r['restart_rss_mb']:,.0f} MiB | {target} |"
            )
    small, large = min(local), max(local)
    lines.append(
        f"\nResident memory per topic (one partition, one record, opened): "
        f"{(local[large]['restart_rss_mb'] - local[small]['restart_rss_mb']) * 1024 / (large - small):,.1f} KiB "
        f"({small:,} to {large:,} topics, after a restart)."
    )
    return "\n".join(lines)


def _plot(
    fan: dict[int, dict[str, float]],
    local: dict[int, dict[str, float]],
    s3: dict[int, dict[str, float]],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    counts = list(fan)
    left.plot(
        counts, [fan[n]["deliveries_per_s"] for n in counts], marker="o", label="deliveries/s"
    )
    left.set_xscale("log")
    left.set_xlabel("endpoints on one topic")
    left.set_ylabel("deliveries/s")
    left.set_ylim(bottom=0)
    twin = left.twinx()
    twin.plot(
        counts,
        [fan[n]["descriptors"] for n in counts],
        marker="s",
        color="tab:orange",
        label="descriptors",
    )
    twin.set_ylabel("open descriptors")
    left.set_title("Fan-out to N endpoints")
    for label, results in (("local", local), ("S3 (moto)", s3)):
        n = list(results)
        right.plot(n, [results[c]["restart_s"] for c in n], marker="o", label=f"restart, {label}")
    right.set_xscale("log")
    right.set_xlabel("topics")
    right.set_ylabel("seconds to open again")
    right.legend(loc="upper left")
    right.set_title("Topics: restart time")
    figure.tight_layout()
    PNG.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(PNG, dpi=100)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("--create", "--restart"):
        child = create_child if sys.argv[1] == "--create" else restart_child
        print(json.dumps(child(int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]))))
    elif len(sys.argv) > 1 and sys.argv[1] == "--fan-out":
        print(json.dumps(fan_out_child(int(sys.argv[2]))))
    else:
        report = main()
        print(report)
        with open(Path(__file__).parent / "RESULTS.md", "a") as out:
            out.write("\n" + report + "\n")
