"""Delivery to HTTP endpoints: throughput to one fast receiver beside the queue group's own
lease+ack rate, isolation beside a failing and a hanging endpoint, and an outage absorbed.

Receivers are benchmarks/null_server.py processes (Brook's own HTTP stack, answering at
once, with 500, or after 60 s). The broker is embedded in the benchmark's process; every
settlement is durable (fdatasynced) before the next attempt of its record. Records 1 KB.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import brook
from benchmarks.queues import _fill, _work
from benchmarks.run import machine, scratch
from benchmarks.server import start, stop
from brook.delivery.endpoint import GROUP_PREFIX

TRIALS = int(os.environ.get("BROOK_BENCH_DELIVERY_TRIALS", "3"))
RECORDS = 20_000
ISOLATION_RECORDS = 10_000
OUTAGE_RECORDS = int(os.environ.get("BROOK_BENCH_OUTAGE_RECORDS", "100000"))
OUTAGE_S = float(os.environ.get("BROOK_BENCH_OUTAGE_S", "60"))
OUTAGE_TRIALS = int(os.environ.get("BROOK_BENCH_OUTAGE_TRIALS", str(TRIALS)))


def receiver(status: int = 200, delay_s: float = 0.0) -> tuple[Any, str]:
    command = [sys.executable, "-m", "benchmarks.null_server", "0", str(status), str(delay_s)]
    process, port = start(command, r"ready (\d+)")
    return process, f"http://127.0.0.1:{port}/hook"


def acked(b: brook.Broker, topic: str, name: str) -> int:
    group = b.queues.find(topic, GROUP_PREFIX + name)
    return 0 if group is None else int(group.counts()["acked"])


def wait_acked(b: brook.Broker, topic: str, name: str, count: int, limit_s: float = 600) -> None:
    """Until `count` records of `name` (made in `b`) are acked. Watched through the loop's
    own counter (a group's counts walk its window: polling them would cost the loop its
    pace), then checked on the group."""
    deadline = time.monotonic() + limit_s
    # The counter counts every ack of the endpoint since it was made in this broker, as
    # the group does once they are durable.
    while b.delivery.stats(name).attempts["ack"] < count:
        assert time.monotonic() < deadline, f"{name}: {acked(b, topic, name)} of {count} acked"
        time.sleep(0.05)
    while acked(b, topic, name) < count:
        assert time.monotonic() < deadline, f"{name}: {acked(b, topic, name)} of {count} acked"
        time.sleep(0.05)


def throughput(workers: int = 0) -> float:
    """Deliveries/s of RECORDS waiting records to one fast receiver (default settings),
    attempts sent by the broker's loop itself or by `workers` processes."""
    folder = scratch()
    process, url = receiver()
    try:
        # (Given only when asked for: benchmarks.compare runs this against older Brooks.)
        options = {"delivery_workers": workers} if workers else {}
        with brook.open(str(folder / "data"), delivery_allow_private_networks=True, **options) as b:
            _fill(b.topic("events"), RECORDS)
            started = time.monotonic()
            b.create_endpoint("fast", url, ["events"], start="earliest")
            wait_acked(b, "events", "fast", RECORDS)
            return RECORDS / (time.monotonic() - started)
    finally:
        stop(process)
        shutil.rmtree(folder, ignore_errors=True)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user and system) the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def split(workers: int, in_flight: int = 16) -> dict[str, float]:
    """Deliveries/s to one fast receiver with the attempts sent by the broker's loop
    (`workers` 0) or by worker processes, once warm (a first endpoint has delivered,
    so the worker is up), and each process's CPU per delivery (microseconds): where the work is."""
    folder = scratch()
    process, url = receiver()
    try:
        options = {"delivery_workers": workers} if workers else {}
        with brook.open(str(folder / "data"), delivery_allow_private_networks=True, **options) as b:
            _fill(b.topic("events"), RECORDS)
            b.create_endpoint("warm", url, ["warm"])
            b.topic("warm").append(b"x")
            wait_acked(b, "warm", "warm", 1)
            pids = {"broker": os.getpid(), "receiver": process.pid}
            if workers:
                pids["worker"] = b.delivery.sender.pids()[0]  # type: ignore[union-attr]
            before = {name: _cpu_s(pid) for name, pid in pids.items()}
            started = time.monotonic()
            b.create_endpoint("fast", url, ["events"], start="earliest", max_in_flight=in_flight)
            wait_acked(b, "events", "fast", RECORDS)
            took = time.monotonic() - started
            found = {
                f"{name}_us": (_cpu_s(pid) - before[name]) / RECORDS * 1e6
                for name, pid in pids.items()
            }
            stats = b.endpoint("fast").stats()
            return {
                "deliveries_per_s": RECORDS / took,
                "latency_p50_ms": stats.latency_p50_ms or 0.0,
                **found,
            }
    finally:
        stop(process)
        shutil.rmtree(folder, ignore_errors=True)


def split_table() -> str:
    """`split` for the loop alone and for one worker, TRIALS alternations, medians."""
    load_before = os.getloadavg()
    runs: dict[tuple[int, int], list[dict[str, float]]] = {}
    for _ in range(TRIALS):
        for workers, in_flight in ((0, 16), (1, 16), (0, 64), (1, 64)):
            runs.setdefault((workers, in_flight), []).append(split(workers, in_flight))
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Delivery: the loop alone, or with a worker process — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load_before[0]:.2f}, after "
        f"{os.getloadavg()[0]:.2f}. `python -m benchmarks.delivery split`.",
        f"- {RECORDS:,} waiting records of 1 KB to one fast receiver (null_server.py), warm; "
        f"medians of {TRIALS} alternations; CPU per delivery from /proc, per process.",
        "",
        "| attempts sent by | in flight | deliveries/s | trials | latency p50 | broker CPU "
        "| worker CPU | receiver CPU |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for (workers, in_flight), trials in runs.items():

        def median(key: str, trials: list[dict[str, float]] = trials) -> float:
            return statistics.median(t.get(key, 0.0) for t in trials)

        rates = ", ".join(f"{t['deliveries_per_s']:,.0f}" for t in trials)
        who = "the broker's loop" if workers == 0 else f"{workers} worker process"
        worker_cpu = f"{median('worker_us'):.0f} us" if workers else "-"
        lines.append(
            f"| {who} | {in_flight} | {median('deliveries_per_s'):,.0f} | {rates} | "
            f"{median('latency_p50_ms'):.2f} ms | {median('broker_us'):.0f} us | {worker_cpu} | "
            f"{median('receiver_us'):.0f} us |"
        )
    return "\n".join(lines)


def queue_baseline() -> float:
    """The same broker's queue group: 16 workers lease and ack 100 at a time (jobs/s)."""
    folder = scratch()
    try:
        with brook.open(str(folder / "data")) as b:
            _fill(b.topic("jobs"), RECORDS)
            return _work(b.queue("jobs", "workers"), RECORDS, 16)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def isolation() -> float:
    """The healthy endpoint's rate beside a 500-answering and a hanging one, over solo."""
    folder = scratch()
    processes = []
    try:
        healthy, healthy_url = receiver()
        failing, failing_url = receiver(500)
        hanging, hanging_url = receiver(200, 60.0)
        processes = [healthy, failing, hanging]
        with brook.open(str(folder / "data"), delivery_allow_private_networks=True) as b:
            b.create_endpoint("healthy", healthy_url, ["t"])
            rates = []
            for phase in ("solo", "beside"):
                if phase == "beside":
                    b.create_endpoint("failing", failing_url, ["t"])
                    b.create_endpoint("hanging", hanging_url, ["t"], timeout_ms=120_000)
                before = acked(b, "t", "healthy")
                started = time.monotonic()
                _fill(b.topic("t"), ISOLATION_RECORDS)
                wait_acked(b, "t", "healthy", before + ISOLATION_RECORDS)
                rates.append(ISOLATION_RECORDS / (time.monotonic() - started))
            return rates[1] / rates[0]
    finally:
        for process in processes:
            stop(process)
        shutil.rmtree(folder, ignore_errors=True)


def outage() -> dict[str, float]:
    """An endpoint down (connection refused) for OUTAGE_S while OUTAGE_RECORDS arrive:
    attempts/s to it during the outage against its pace before, and the seconds from
    its return to an empty backlog (no rate limit set). Nothing may be lost."""
    folder = scratch()
    process, url = receiver()
    port = url.split(":")[2].split("/")[0]
    try:
        with brook.open(str(folder / "data"), delivery_allow_private_networks=True) as b:
            b.create_endpoint("partner", url, ["orders"], max_attempts=1000)
            started = time.monotonic()
            _fill(b.topic("orders"), 10_000)
            wait_acked(b, "orders", "partner", 10_000)
            before_rate = 10_000 / (time.monotonic() - started)
            stop(process)  # down: connections refused
            stats = b.delivery.stats("partner")
            attempts_before = sum(stats.attempts.values())
            down_at = time.monotonic()
            attempts_per_s = []
            last = attempts_before
            filled = 0
            per_second = max(1000, round(OUTAGE_RECORDS / OUTAGE_S / 1000) * 1000)
            while time.monotonic() - down_at < OUTAGE_S:
                if filled < OUTAGE_RECORDS:
                    _fill(b.topic("orders"), per_second)
                    filled += per_second
                time.sleep(max(0.0, min(1.0, OUTAGE_S - (time.monotonic() - down_at))))
                now = sum(stats.attempts.values())
                attempts_per_s.append(now - last)
                last = now
            process, _ = start(
                [sys.executable, "-m", "benchmarks.null_server", port], r"ready (\d+)"
            )
            back_at = time.monotonic()
            acks_before = stats.attempts["ack"]
            while stats.attempts["ack"] == acks_before:  # the breaker's probe finds it back
                time.sleep(0.005)
            found = time.monotonic() - back_at
            wait_acked(b, "orders", "partner", 10_000 + filled)
            drained = time.monotonic() - back_at
            assert b.endpoint("partner").stats().dead == 0
            return {
                "before_rate": before_rate,
                "peak_attempts_per_s_down": max(attempts_per_s) if attempts_per_s else 0,
                "drained_s": drained,
                "found_s": found,
                "records": float(filled),
            }
    finally:
        stop(process)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> str:
    load_before = os.getloadavg()
    rates, baselines, ratios, outages = [], [], [], []
    for _ in range(TRIALS):
        rates.append(throughput())
        baselines.append(queue_baseline())
        ratios.append(isolation())
    for _ in range(OUTAGE_TRIALS):
        outages.append(outage())
    rate, base, ratio = (statistics.median(x) for x in (rates, baselines, ratios))
    o = sorted(outages, key=lambda result: result["drained_s"])[len(outages) // 2]
    drained = ", ".join(f"{result['drained_s']:.1f}" for result in outages)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    def listed(values: list[float]) -> str:
        return ", ".join(f"{v:,.2f}" if v < 10 else f"{v:,.0f}" for v in values)

    return (
        split_table()
        + "\n\n"
        + "\n".join(
            [
                f"## Delivery to HTTP endpoints — {stamp}",
                "",
                f"- Machine: {machine()}; load average before {load_before[0]:.2f}, after "
                f"{os.getloadavg()[0]:.2f}.",
                "- Receivers: benchmarks/null_server.py processes on loopback (Brook's HTTP stack, "
                "answering at once; with 500; or after 60 s). The broker is embedded in the "
                "benchmark's process, default endpoint settings (16 in flight), records of 1 KB; "
                "every settlement is durable before the record's next attempt.",
                f"- Medians of {TRIALS} trials; each ratio is between figures of the same run.",
                "",
                "| scenario | median | trials | target | vs baseline |",
                "| --- | ---: | --- | --- | --- |",
                f"| deliveries/s to one fast endpoint ({RECORDS:,} waiting) | {rate:,.0f} | "
                f"{listed(rates)} | >= 5,000/s | {rate / base:.2f}x the queue group's lease+ack "
                f"({base:,.0f} jobs/s, 16 workers, batches of 100) |",
                f"| healthy endpoint beside a 100%-failing and a hanging one, over solo | "
                f"{ratio:.2f} | {listed(ratios)} | >= 0.9 | |",
                f"| outage: {o['records']:,.0f} records arrive while the endpoint is down "
                f"{OUTAGE_S:.0f} s; seconds from its return to an empty backlog | "
                f"{o['drained_s']:.1f} | {drained} | "
                "<= 20 s | "
                f"0 lost, 0 dead; found back after {listed([x['found_s'] for x in outages])} s "
                f"(the breaker's probe), then {o['records'] / (o['drained_s'] - o['found_s']):,.0f} "
                f"deliveries/s; attempts/s while down at most "
                f"{max(x['peak_attempts_per_s_down'] for x in outages):,.0f} against "
                f"{o['before_rate']:,.0f} deliveries/s before |",
            ]
        )
    )


if __name__ == "__main__":
    print(split_table() if sys.argv[1:] == ["split"] else main())
