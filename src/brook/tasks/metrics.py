"""`brook worker --metrics-port P`: a worker's own Prometheus series, per task.

    brook_task_run_seconds{task}              histogram of run times (settled runs)
    brook_task_outcomes_total{task,outcome}   success, retry, dead, timeout (a timeout is
                                              also a retry or dead: it counts in both)
    brook_task_in_flight{task}                jobs running now
    brook_worker_slots                        the worker's --concurrency
    brook_worker_slots_busy                   slots running a job now

Labels are the worker's task names only, so a scrape stays small whatever the jobs.
The broker's /metrics tells the queues' side (backlogs, ages, dead records).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

OUTCOMES = ("success", "retry", "dead", "timeout")
RUN_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
"""Run-time histogram buckets: a no-op job to a five-minute one."""

Snapshot = Callable[[], tuple[int, dict[str, int]]]
"""(slots busy, jobs running per task), read under the worker's lock."""


class WorkerMetrics:
    def __init__(self, tasks: Iterable[str], slots: int, snapshot: Snapshot) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.tasks = sorted(tasks)
        self.run_seconds = Histogram(
            "brook_task_run_seconds",
            "How long runs took, by task (settled runs)",
            ["task"],
            buckets=RUN_BUCKETS_S,
            registry=self.registry,
        )
        self.outcomes = Counter(
            "brook_task_outcomes",
            "Runs settled, by task and outcome (success, retry, dead, timeout)",
            ["task", "outcome"],
            registry=self.registry,
        )
        for task in self.tasks:  # every series from the start: rates need a zero
            for outcome in OUTCOMES:
                self.outcomes.labels(task, outcome)
        self.registry.register(_Slots(self.tasks, slots, snapshot))

    def observe(self, task: str, ran_ms: float, outcome: str, timed_out: bool) -> None:
        """A settled run of `task`: its time and outcome."""
        self.run_seconds.labels(task).observe(ran_ms / 1000)
        self.outcomes.labels(task, outcome).inc()
        if timed_out:
            self.outcomes.labels(task, "timeout").inc()

    def serve(self, host: str, port: int) -> Any:
        """Serve the series at http://host:port/metrics on a thread; the server."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server


class _Slots(Collector):
    """Slots and jobs in flight, read at each scrape."""

    def __init__(self, tasks: list[str], slots: int, snapshot: Snapshot) -> None:
        self.tasks = tasks
        self.slots = slots
        self.snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily]:
        busy, running = self.snapshot()
        yield GaugeMetricFamily("brook_worker_slots", "Jobs run at once at most", value=self.slots)
        yield GaugeMetricFamily("brook_worker_slots_busy", "Slots running a job now", value=busy)
        in_flight = GaugeMetricFamily("brook_task_in_flight", "Jobs running now", labels=["task"])
        for task in self.tasks:
            in_flight.add_metric([task], running.get(task, 0))
        yield in_flight
