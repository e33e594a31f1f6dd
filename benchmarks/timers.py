"""Timers: scheduling rate, memory of a million pending timers, firing rate and lag.

- Scheduling: batches of 10,000 timers (100-byte values) due at random over 30
  days, each batch durable before the call returns; beside appending the same
  records to a topic in the same batches (the durable-write ceiling), same run.
- Memory: 1,000,000 timers over 30 days scheduled in a fresh `python` process
  on an embedded broker, flushed to their buckets; its resident memory then,
  and in a second process that opens the same data (a restart).
- Firing: timers due at a steady rate R for a few seconds; the lag of each
  (its record's timestamp minus its due time); the highest R whose p99 lag
  stays under a second is the sustainable rate.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import brook
from benchmarks.run import machine, payloads, scratch, section_main
from brook.records import Record

TRIALS = 3
BATCH = 10_000
SCHEDULED = 200_000
DAY_MS = 24 * 3600 * 1000
PENDING = 1_000_000
FIRE_SECONDS = 4.0
FIRE_RATES = (10_000, 20_000, 40_000, 80_000)

MEMORY_CHILD = """
import os, random, sys, time, gc
import brook
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
data, schedule = sys.argv[1], sys.argv[2] == "schedule"
b = brook.open(data)
if schedule:
    rng = random.Random(7)
    now = int(time.time() * 1000)
    value = bytes(100)
    for start in range(0, %(pending)d, %(batch)d):
        b.schedule_many([
            brook.TimerSpec("later", value, at=now + 60_000 + rng.randrange(30 * %(day)d))
            for _ in range(%(batch)d)
        ])
    b.timers.flush()
gc.collect()
print(f"{b.timers.pending()} {rss_mb():.0f}", flush=True)
b.close()
"""


def schedule_rate() -> tuple[float, float]:
    """(timers/s, records/s of the same batches appended to a topic)."""
    folder = scratch()
    try:
        rng = random.Random(1)
        value = payloads(100, 1)[0]
        with brook.open(str(folder / "data")) as b:
            now = int(time.time() * 1000)
            batches = [
                [
                    brook.TimerSpec("later", value, at=now + 60_000 + rng.randrange(30 * DAY_MS))
                    for _ in range(BATCH)
                ]
                for _ in range(SCHEDULED // BATCH)
            ]
            started = time.perf_counter()
            for batch in batches:
                b.schedule_many(batch)
            timers = SCHEDULED / (time.perf_counter() - started)
            topic = b.topic("plain")
            records = [Record(value) for _ in range(BATCH)]
            started = time.perf_counter()
            for _ in range(SCHEDULED // BATCH):
                topic.append_many(records)
            appends = SCHEDULED / (time.perf_counter() - started)
        return timers, appends
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def memory() -> tuple[float, float, int]:
    """(RSS MB after scheduling, RSS MB after a restart, timers pending after it)."""
    folder = scratch()
    code = MEMORY_CHILD % {"pending": PENDING, "batch": BATCH, "day": DAY_MS}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    try:
        outs = []
        for mode in ("schedule", "open"):
            out = subprocess.run(
                [sys.executable, "-c", code, str(folder / "data"), mode],
                check=True,
                capture_output=True,
                text=True,
                env=env,
            ).stdout.split()
            outs.append(out)
        return float(outs[0][1]), float(outs[1][1]), int(outs[1][0])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def fire(rate: int) -> tuple[float, float, float]:
    """Timers due at `rate` per second for FIRE_SECONDS: (fired per second, p50 and
    p99 lag in seconds)."""
    folder = scratch()
    try:
        with brook.open(str(folder / "data")) as b:
            count = int(rate * FIRE_SECONDS)
            start = int(time.time() * 1000) + 3_000  # time to schedule them all first
            value = bytes(100)
            specs = [
                brook.TimerSpec("fired", value, at=start + i * 1000 // rate) for i in range(count)
            ]
            for i in range(0, count, BATCH):
                b.schedule_many(specs[i : i + BATCH])
            assert time.time() * 1000 < start, "scheduling took longer than the head start"
            deadline = time.monotonic() + FIRE_SECONDS + 60
            topic = b.topic("fired")
            while time.monotonic() < deadline:
                # b.core since issue 16 (benchmarks.compare runs older versions too)
                core = getattr(b, "core", b)
                if core.has_topic("fired") and sum(topic.end_offsets().values()) >= count:
                    break
                time.sleep(0.05)
            records: list[Record] = []
            while len(records) < count:
                got = topic.read(0, len(records), 10_000)
                if not got:
                    break
                records.extend(got)
            lags = sorted(
                (r.timestamp - (start + i * 1000 // rate)) / 1000 for i, r in enumerate(records)
            )
            elapsed = (records[-1].timestamp - records[0].timestamp) / 1000 or 1e-9
            return (
                len(records) / max(elapsed, FIRE_SECONDS * 0.9),
                lags[len(lags) // 2],
                lags[int(len(lags) * 0.99)],
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> str:
    load_before = os.getloadavg()[0]
    rates: list[float] = []
    appends: list[float] = []
    for _ in range(TRIALS):
        timers, plain = schedule_rate()
        rates.append(timers)
        appends.append(plain)
        print(f"timers: schedule {timers:,.0f}/s, plain appends {plain:,.0f}/s", flush=True)
    scheduled_mb, restarted_mb, pending = memory()
    print(
        f"timers: {pending:,} pending, RSS {scheduled_mb:.0f} / {restarted_mb:.0f} MB", flush=True
    )
    firing: dict[int, list[tuple[float, float, float]]] = {r: [] for r in FIRE_RATES}
    for _ in range(TRIALS):
        for rate in FIRE_RATES:
            firing[rate].append(fire(rate))
            got = firing[rate][-1]
            print(f"timers: due {rate:,}/s: p50 {got[1]:.3f} s, p99 {got[2]:.3f} s", flush=True)
    med_rate, med_append = statistics.median(rates), statistics.median(appends)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Timers — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load_before:.2f}, after "
        f"{os.getloadavg()[0]:.2f}.",
        f"- Scheduling: batches of {BATCH:,} timers with 100-byte values due at random over "
        f"30 days, {SCHEDULED:,} per trial, each batch durable (fdatasync) before the call "
        "returns. Baseline: the same batches appended to a topic, same run.",
        f"- Memory: {PENDING:,} timers over 30 days in a fresh process, flushed to their "
        "hour buckets; resident memory (VmRSS) then, and after a restart on the same data.",
        f"- Firing: timers due at a steady rate for {FIRE_SECONDS:.0f} s; lag = the record's "
        "timestamp minus the due time. Medians of 3 trials.",
        "",
        "| scenario | median | trials | target | vs baseline |",
        "| --- | ---: | --- | --- | --- |",
        f"| schedule, batches of {BATCH:,} (timers/s) | {med_rate:,.0f} | "
        f"{', '.join(f'{r:,.0f}' for r in rates)} | >= 100,000 | "
        f"{med_rate / med_append:.2f}x plain appends ({med_append:,.0f} records/s) |",
        f"| {pending:,} pending over 30 days: RSS after scheduling / after a restart (MB) | "
        f"{scheduled_mb:.0f} / {restarted_mb:.0f} | | <= 300 | |",
    ]
    for rate in FIRE_RATES:
        p50 = statistics.median(t[1] for t in firing[rate])
        p99 = statistics.median(t[2] for t in firing[rate])
        trials = ", ".join(f"{t[2]:.3f}" for t in firing[rate])
        target = ">= 10,000/s with p99 <= 1 s" if rate == 10_000 else ""
        lines.append(
            f"| timers due {rate:,}/s: fire lag p50 / p99 (s) | {p50:.3f} / {p99:.3f} | "
            f"p99: {trials} | {target} | |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    section_main(main)
