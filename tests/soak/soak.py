"""A soak: mixed load through one `brook serve` for a long time, sampled as it goes.

    PYTHONPATH=src:. python -m tests.soak.soak SECONDS [PNG]

Producers post keyed JSON batches (throttled, about 400 records/s) to a topic
with time retention, a stream group polls and commits it, queue workers lease
it and ack (nine in ten) or nack, a scheduler schedules timers a few seconds
ahead and cancels some, and an endpoint delivers another topic to a receiver
that fails every other 5 seconds (500s) and then recovers. Every 5 seconds the
server's resident memory, open files and the producers' request latency (p50,
p99) are sampled. At the end the load stops and everything is drained: every
timer not cancelled fired, every event reached the receiver, every record of the
queue is acked or dead.

`run(seconds)` returns the samples and counts; `tests/soak/test_soak.py` checks
them (BROOK_SOAK_S seconds: 20 in `make test`, 1800 in `make reliability`), and
with a PNG path the module plots them (docs/soak.png).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import brook
from brook.errors import BrookError, LeaseExpired
from tests.delivery.receivers import Answer, Got, Receiver
from tests.served import Served

SAMPLE_S = 5.0
PRODUCERS = 4
WORKERS = 4
RECORDS_PER_S = 400
FLAP_S = 5.0


@dataclass
class Sample:
    at_s: float
    rss_mb: float
    open_files: int
    p50_ms: float
    p99_ms: float
    requests: int


@dataclass
class Soak:
    seconds: float
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    produced: int = 0
    consumed: int = 0
    acked: int = 0
    nacked: int = 0
    timers: int = 0
    cancelled: int = 0
    fired: int = 0
    events: int = 0
    delivered: int = 0
    queue_stats: dict[str, int] = field(default_factory=dict)


class _Latencies:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ms: list[float] = []

    def add(self, ms: float) -> None:
        with self._lock:
            self._ms.append(ms)

    def take(self) -> list[float]:
        with self._lock:
            taken, self._ms = self._ms, []
        return taken


def _process_figures(pid: int) -> tuple[float, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))
    return rss_kb / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def run(seconds: float, folder: Path) -> Soak:
    soak = Soak(seconds)
    stop = threading.Event()
    latencies = _Latencies()
    lock = threading.Lock()
    started = time.monotonic()

    def failing_half_the_time(got: Got) -> Answer:
        failing = int((time.monotonic() - started) / FLAP_S) % 2 == 1 and not stop.is_set()
        return Answer(status=500, body=b"flapping") if failing else Answer()

    def error(where: str, exc: BaseException) -> None:
        with lock:
            soak.errors.append(f"{where}: {exc!r}")

    config = folder / "brook.toml"
    config.write_text("delivery_allow_private_networks = true\n")
    with Receiver(failing_half_the_time) as receiver:
        server = Served(folder / "data", config=config)
        url = f"http://127.0.0.1:{server.port}"
        try:
            with brook.connect(url) as admin:
                admin.create_topic("soak.orders", partitions=4, retention_ms=120_000)
                admin.create_topic("soak.events", partitions=2)
                admin.create_topic("soak.timers")
                admin.create_endpoint(
                    "flappy",
                    receiver.url,
                    topics=["soak.events"],
                    backoff={"min_ms": 100, "max_ms": 2_000},
                    max_attempts=1_000,
                )
                admin.queue(
                    "soak.orders",
                    "workers",
                    visibility_timeout_ms=10_000,
                    backoff={"min_ms": 50, "max_ms": 500},
                    max_attempts=4,
                )

            def produce(n: int) -> None:
                rng = random.Random(n)
                connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
                pause = PRODUCERS * 10 / RECORDS_PER_S
                seq = 0
                while not stop.is_set():
                    topic = "soak.events" if seq % 10 == 0 else "soak.orders"
                    body = json.dumps(
                        {
                            "records": [
                                {
                                    "value": f"{n}-{seq}-{i}-" + "x" * rng.randrange(10, 400),
                                    "key": f"k{rng.randrange(50)}",
                                }
                                for i in range(10)
                            ]
                        }
                    )
                    begun = time.perf_counter()
                    connection.request(
                        "POST",
                        f"/v1/topics/{topic}/records",
                        body,
                        {"content-type": "application/json"},
                    )
                    response = connection.getresponse()
                    answer = response.read()
                    latencies.add((time.perf_counter() - begun) * 1000)
                    if response.status != 200:
                        error("produce", RuntimeError(f"{response.status} {answer[:200]!r}"))
                    else:
                        with lock:
                            if topic == "soak.events":
                                soak.events += 10
                            soak.produced += 10
                    seq += 1
                    stop.wait(pause)
                connection.close()

            def consume() -> None:
                with brook.connect(url) as b:
                    consumer = b.consumer("soak.orders", "analytics")
                    while not stop.is_set():
                        records = consumer.poll(max_records=500, timeout=0.5)
                        if records:
                            consumer.commit()
                            with lock:
                                soak.consumed += len(records)

            def work(n: int) -> None:
                rng = random.Random(100 + n)
                with brook.connect(url) as b:
                    queue = b.queue("soak.orders", "workers")
                    while not stop.is_set():
                        jobs = queue.lease(max_records=50, timeout=0.5)
                        acks = [j for j in jobs if rng.random() < 0.9]
                        nacks = [j for j in jobs if j not in acks]
                        try:
                            if acks:
                                queue.ack(acks)
                            if nacks:
                                queue.nack(nacks, reason="soak says no")
                        except LeaseExpired:
                            continue  # a slow moment: those come back, as they should
                        with lock:
                            soak.acked += len(acks)
                            soak.nacked += len(nacks)

            scheduled: dict[str, int] = {}
            cancelled: set[str] = set()

            def schedule() -> None:
                rng = random.Random(7)
                with brook.connect(url) as b:
                    n = 0
                    while not stop.is_set():
                        timer_id = f"t{n}"
                        b.schedule(
                            "soak.timers",
                            b"due",
                            delay_ms=rng.randrange(500, 5_000),
                            timer_id=timer_id,
                        )
                        scheduled[timer_id] = n
                        if rng.random() < 0.2 and b.cancel_timer(timer_id):
                            cancelled.add(timer_id)
                        n += 1
                        stop.wait(0.02)

            def guarded(fn: Any, *args: Any) -> Any:
                def body() -> None:
                    try:
                        fn(*args)
                    except (BrookError, OSError, http.client.HTTPException) as exc:
                        error(fn.__name__, exc)
                        stop.set()

                return body

            threads = [threading.Thread(target=guarded(produce, n)) for n in range(PRODUCERS)]
            threads += [threading.Thread(target=guarded(work, n)) for n in range(WORKERS)]
            threads += [
                threading.Thread(target=guarded(consume)),
                threading.Thread(target=guarded(schedule)),
            ]
            for thread in threads:
                thread.start()
            deadline = started + seconds
            while not stop.wait(max(0.0, min(SAMPLE_S, deadline - time.monotonic()))):
                taken = sorted(latencies.take())
                rss, files = _process_figures(server.process.pid)
                soak.samples.append(
                    Sample(
                        round(time.monotonic() - started, 1),
                        round(rss, 1),
                        files,
                        round(statistics.median(taken), 2) if taken else 0.0,
                        round(taken[int(len(taken) * 0.99)], 2) if taken else 0.0,
                        len(taken),
                    )
                )
                if time.monotonic() >= deadline:
                    break
            stop.set()
            for thread in threads:
                thread.join(60)

            # Drain: timers fire, events arrive (the receiver no longer fails), work ends.
            with brook.connect(url) as b:
                wanted = set(scheduled) - cancelled
                drain_until = time.monotonic() + 120
                fired: set[str] = set()
                while time.monotonic() < drain_until:
                    fired = {
                        r.headers["brook.timer.id"].decode()
                        for p in range(1)
                        for r in _read_all(b, "soak.timers", p)
                        if r.headers
                    }
                    got = {g.body for g in receiver.requests()}
                    if wanted <= fired and len(got) >= soak.events:
                        break
                    time.sleep(0.5)
                soak.timers, soak.cancelled, soak.fired = len(scheduled), len(cancelled), len(fired)
                soak.delivered = len({g.body for g in receiver.requests()})
                if not wanted <= fired:
                    soak.errors.append(f"{len(wanted - fired)} timers never fired")
                if fired & cancelled:
                    soak.errors.append(f"{len(fired & cancelled)} cancelled timers fired")
                queue = b.queue("soak.orders", "workers")
                while time.monotonic() < drain_until:
                    jobs = queue.lease(max_records=1_000, timeout=0.5)
                    if jobs:
                        queue.ack(jobs)
                    stats = queue.stats()
                    if stats["ready"] == stats["leased"] == stats["retrying"] == 0 and not jobs:
                        break
                soak.queue_stats = queue.stats()
        finally:
            server.close()
    return soak


def _read_all(b: Any, topic: str, partition: int) -> list[brook.Record]:
    out: list[brook.Record] = []
    while batch := b.topic(topic).read(partition, len(out), 10_000):
        out.extend(batch)
    return out


def plot(soak: Soak, png: Path) -> None:
    """Latency p50/p99, resident memory and open files over the soak, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    at = [s.at_s / 60 for s in soak.samples]
    figure, (latency, memory) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    latency.plot(at, [s.p50_ms for s in soak.samples], label="p50")
    latency.plot(at, [s.p99_ms for s in soak.samples], label="p99")
    latency.set_ylabel("produce request (ms)")
    latency.legend(loc="upper right")
    latency.set_title(f"brook serve under mixed load for {soak.seconds / 60:.0f} min")
    memory.plot(at, [s.rss_mb for s in soak.samples], color="tab:green", label="resident MiB")
    memory.set_ylabel("resident memory (MiB)")
    files = memory.twinx()
    files.plot(at, [s.open_files for s in soak.samples], color="tab:red", label="open files")
    files.set_ylabel("open files")
    memory.set_xlabel("minutes")
    figure.tight_layout()
    figure.savefig(png, dpi=100)


def main() -> None:
    seconds = float(sys.argv[1])
    folder = Path(tempfile.mkdtemp(prefix="brook-soak-"))
    soak = run(seconds, folder)
    print(json.dumps({k: v for k, v in soak.__dict__.items() if k != "samples"}, indent=1))
    for s in soak.samples:
        print(s)
    if len(sys.argv) > 2:
        plot(soak, Path(sys.argv[2]))


if __name__ == "__main__":
    main()
