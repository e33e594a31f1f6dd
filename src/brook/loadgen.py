"""`brook bench`: append records as fast as durability allows and report what happened.

Producers are threads, each appending batches of records (one record per call
when batch is 1) to one topic, embedded or through a running server. The result
reports records/s, MB/s and the latency of each durable call.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from brook.records import Record


class BenchResult(NamedTuple):
    records: int
    seconds: float
    latencies_ms: list[float]

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    def percentile(self, fraction: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]

    def summary(self, size: int) -> str:
        mean = statistics.fmean(self.latencies_ms) if self.latencies_ms else 0.0
        return (
            f"{self.records:,} records in {self.seconds:.2f} s: {self.records_per_s:,.0f} records/s, "
            f"{self.records_per_s * size / 1e6:,.1f} MB/s; latency per call mean {mean:.2f} ms, "
            f"p50 {self.percentile(0.5):.2f} ms, p99 {self.percentile(0.99):.2f} ms"
        )


def run(
    broker: Any,
    topic: str,
    records: int,
    size: int,
    batch: int,
    producers: int,
    progress: Callable[[int], None] = lambda done: None,
) -> BenchResult:
    """Append `records` records of `size` random bytes, `batch` per call, from `producers` threads."""
    values = [os.urandom(size) for _ in range(min(batch, 1000))]
    prepared = [Record(values[i % len(values)]) for i in range(batch)]
    remaining = [records]
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[BaseException] = []
    target = broker.topic(topic)

    def produce() -> None:
        while True:
            with lock:
                take = min(batch, remaining[0])
                remaining[0] -= take
            if take <= 0:
                return
            started = time.perf_counter()
            try:
                if batch == 1:
                    target.append(prepared[0].value)
                else:
                    target.append_many(prepared[:take])
            except BaseException as exc:
                errors.append(exc)
                return
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                latencies.append(elapsed)
            progress(take)

    threads = [threading.Thread(target=produce) for _ in range(producers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    if errors:
        raise errors[0]
    return BenchResult(records, seconds, latencies)
