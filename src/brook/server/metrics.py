"""GET /metrics: the broker's counters in the Prometheus text format.

Counters live in the broker (brook/stats.py) and in the Api (requests); this
collector reads them at scrape time, so nothing is updated twice.

Delivery is bounded at any number of endpoints (SPEC §7): aggregates over every
endpoint (brook_delivery_all_*, brook_delivery_endpoints{state}, ...) carry no endpoint
label; the per-endpoint series (brook_delivery_*{endpoint}, and brook_queue_* of an
endpoint's queue groups) are given only to the endpoints failing now and to those
chosen with `metrics_endpoints`, at most limits.metrics_endpoints_shown_max
(Broker.delivery_summary says which).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from brook import limits
from brook.broker import Broker
from brook.errors import EndpointNotFound
from brook.models import DeliverySummary, Histogram
from brook.server.http import Connections
from brook.stats import BATCH_SECONDS_BUCKETS


class RequestCounts:
    """HTTP requests answered, by route template, method and status."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, int]] = Counter()

    def add(self, route: str, method: str, status: int) -> None:
        self.counts[(route, method, status)] += 1


class BrookCollector(Collector):
    def __init__(self, broker: Broker, requests: RequestCounts) -> None:
        self.broker = broker
        self.requests = requests

    def collect(self) -> Iterator[Metric]:
        stats = self.broker.commit_stats()
        yield CounterMetricFamily(
            "brook_records_appended", "Records made durable", value=stats.records_appended
        )
        yield CounterMetricFamily(
            "brook_bytes_appended", "Bytes of records made durable", value=stats.bytes_appended
        )
        yield CounterMetricFamily(
            "brook_batches", "Batches made durable", value=stats.batches_written
        )
        yield CounterMetricFamily(
            "brook_batches_failed", "Batches whose write or sync failed", value=stats.failed_batches
        )
        yield CounterMetricFamily(
            "brook_fsyncs",
            "Syncs that made commit rounds durable (of the write-ahead log; on object storage, "
            "one PUT per partition a round wrote)",
            value=stats.syncs,
        )
        yield CounterMetricFamily(
            "brook_commit_rounds", "Commit rounds made durable or failed", value=stats.rounds
        )
        yield CounterMetricFamily(
            "brook_checkpoints", "Checkpoints written (write-ahead log)", value=stats.checkpoints
        )
        yield CounterMetricFamily(
            "brook_checkpoint_fsyncs",
            "Segment syncs made by checkpoints",
            value=stats.checkpoint_syncs,
        )
        yield CounterMetricFamily(
            "brook_wal_bytes", "Bytes written to the write-ahead log", value=stats.wal_bytes
        )
        yield GaugeMetricFamily(
            "brook_wal_pending_bytes",
            "Write-ahead log past the last checkpoint (what a restart after a crash replays)",
            value=stats.wal_pending_bytes,
        )
        cumulative, buckets = 0, []
        for bound, count in zip(
            [*map(str, BATCH_SECONDS_BUCKETS), "+Inf"], stats.batch_seconds_counts, strict=True
        ):
            cumulative += count
            buckets.append((bound, cumulative))
        yield HistogramMetricFamily(
            "brook_batch_seconds",
            "Time from a batch being taken by the writer to its callers being answered",
            buckets=buckets,
            sum_value=stats.batch_seconds_sum,
        )
        requests = CounterMetricFamily(
            "brook_http_requests", "HTTP requests answered", labels=["route", "method", "status"]
        )
        for (route, method, status), count in sorted(self.requests.counts.items()):
            requests.add_metric([route, method, str(status)], count)
        yield requests
        lag = GaugeMetricFamily(
            "brook_group_lag",
            "Records not yet committed by a stream group",
            labels=["topic", "group", "partition"],
        )
        for consumer in self.broker.stream_groups():
            for partition, records in consumer.lag().items():
                lag.add_metric([consumer.topic, consumer.group, str(partition)], records)
        yield lag
        delivery = self.broker.delivery_summary()
        yield from self._queues(delivery.shown_groups)
        yield from _delivery_totals(delivery)
        yield from self._delivery(delivery.shown)
        yield from self._timers()
        yield from self._object_storage()
        yield from self._background()

    def _background(self) -> Iterator[Metric]:
        broker = self.broker
        errors = CounterMetricFamily(
            "brook_background_errors",
            "Errors in the broker's background loops (each is logged, then retried)",
            labels=["loop"],
        )
        for loop, count in sorted(broker.background_errors().items()):
            errors.add_metric([loop], count)
        yield errors
        failing = GaugeMetricFamily(
            "brook_background_failing",
            "Background loops (or tasks) failing now: 1 each, until they work again",
            labels=["loop", "task"],
        )
        for failure in broker.failing():
            failing.add_metric([failure.loop, failure.task or ""], 1)
        yield failing
        isolated = GaugeMetricFamily(
            "brook_subject_failing",
            "Work for one endpoint or queue group failing now (that subject's alone: the "
            "others go on): 1 each, until it works again",
            labels=["loop", "subject", "task"],
        )
        for failure in broker.isolated():
            isolated.add_metric([failure.loop, failure.subject or "", failure.task or ""], 1)
        yield isolated

    def _timers(self) -> Iterator[Metric]:
        stats = self.broker.timer_stats()
        yield GaugeMetricFamily(
            "brook_timers_pending", "Timers scheduled and not yet fired", value=stats.pending
        )
        yield CounterMetricFamily("brook_timers_fired", "Timers fired", value=stats.fired)
        yield HistogramMetricFamily(
            "brook_timer_fire_lag_seconds",
            "How late timers fired: when their record was durable minus when they were due",
            buckets=_cumulative(stats.lag_s),
            sum_value=stats.lag_s.sum,
        )

    def _queues(self, endpoints_groups: list[tuple[str, str]]) -> Iterator[Metric]:
        """Every queue group of users, and of delivery's those of `endpoints_groups`."""
        records = GaugeMetricFamily(
            "brook_queue_records",
            "Records of a queue group by state (acked: all ever acked); a delivery "
            "endpoint's groups only while it has series of its own (brook_delivery_*"
            f"{{endpoint}}), at most {limits.metrics_endpoint_groups_shown_max} of them: "
            "brook_delivery_all_backlog counts every endpoint's",
            labels=["topic", "group", "state"],
        )
        oldest = GaugeMetricFamily(
            "brook_queue_oldest_ready_age_seconds",
            "How long the longest-waiting ready record of a queue group has waited (a "
            "delivery endpoint's groups as brook_queue_records)",
            labels=["topic", "group"],
        )
        found = (self.broker.find_queue(topic, group) for topic, group in endpoints_groups)
        groups = self.broker.queue_groups(delivery=False)
        for group in [*groups, *(queue for queue in found if queue is not None)]:
            counts = group.counts()
            age = counts.pop("oldest_ready_age_ms")
            for state, count in counts.items():
                records.add_metric([group.topic, group.group, state], count)
            oldest.add_metric([group.topic, group.group], age / 1000)
        yield records
        yield oldest

    def _delivery(self, shown: list[str]) -> Iterator[Metric]:
        """Per endpoint, for those `shown` only: attempts by outcome and status, latency,
        in flight, breaker, backlog."""
        attempts = CounterMetricFamily(
            "brook_delivery_attempts",
            "Delivery attempts, by what followed (ack, retry, dead, disable)" + _SHOWN,
            labels=["endpoint", "outcome"],
        )
        statuses = CounterMetricFamily(
            "brook_delivery_responses",
            "Delivery attempts by HTTP status, or by error kind when there was none" + _SHOWN,
            labels=["endpoint", "status"],
        )
        latency = HistogramMetricFamily(
            "brook_delivery_latency_seconds",
            "How long delivery attempts took" + _SHOWN,
            labels=["endpoint"],
        )
        in_flight = GaugeMetricFamily(
            "brook_delivery_in_flight", "Attempts in flight" + _SHOWN, labels=["endpoint"]
        )
        breaker = GaugeMetricFamily(
            "brook_delivery_breaker_open",
            "1 while the endpoint's circuit breaker is open (or probing), else 0" + _SHOWN,
            labels=["endpoint", "state"],
        )
        backlog = GaugeMetricFamily(
            "brook_delivery_backlog",
            "Records waiting to be delivered (ready, leased or retrying)" + _SHOWN,
            labels=["endpoint"],
        )
        failing = GaugeMetricFamily(
            "brook_delivery_failing",
            "1 while the broker's own work for the endpoint fails (a dead letter not "
            "stored, leasing, settling), else 0" + _SHOWN,
            labels=["endpoint"],
        )
        for name in shown:
            try:
                counters = self.broker.endpoint(name).counters()
            except EndpointNotFound:  # deleted since the listing
                continue
            for outcome, count in sorted(counters.attempts.items()):
                attempts.add_metric([name, outcome], count)
            for status, count in sorted(counters.statuses.items()):
                statuses.add_metric([name, status], count)
            latency.add_metric(
                [name], _cumulative(counters.latency_s), sum_value=counters.latency_s.sum
            )
            in_flight.add_metric([name], counters.in_flight)
            breaker.add_metric([name, counters.breaker], 0 if counters.breaker == "closed" else 1)
            backlog.add_metric([name], counters.backlog)
            failing.add_metric([name], 1 if counters.failing else 0)
        yield from (attempts, statuses, latency, in_flight, breaker, backlog, failing)

    def _object_storage(self) -> Iterator[Metric]:
        """What the object store bills for: requests by kind and bytes moved (S3 only)."""
        stats = self.broker.storage_stats()
        if not stats.object_store:
            return
        requests = CounterMetricFamily(
            "brook_object_requests", "Requests made to the object store", labels=["kind"]
        )
        for kind, count in stats.requests.items():
            requests.add_metric([kind], count)
        yield requests
        yield CounterMetricFamily(
            "brook_object_bytes_sent", "Bytes sent to the object store", value=stats.bytes_sent
        )
        yield CounterMetricFamily(
            "brook_object_bytes_received",
            "Bytes received from the object store",
            value=stats.bytes_received,
        )
        if stats.cache_hits is not None and stats.cache_misses is not None:
            hits = CounterMetricFamily(
                "brook_cache_reads", "Reads of objects by the local cache", labels=["result"]
            )
            hits.add_metric(["hit"], stats.cache_hits)
            hits.add_metric(["miss"], stats.cache_misses)
            yield hits
            yield GaugeMetricFamily(
                "brook_cache_bytes", "Disk space the local cache uses", value=stats.cache_bytes
            )


_SHOWN = (
    f". Only for endpoints failing now or chosen (metrics_endpoints), at most "
    f"{limits.metrics_endpoints_shown_max}, failing ones first; every endpoint counts in "
    "brook_delivery_all_*"
)


def _delivery_totals(summary: DeliverySummary) -> Iterator[Metric]:
    """Delivery over every endpoint, with no endpoint label: bounded at any number of them."""
    attempts = CounterMetricFamily(
        "brook_delivery_all_attempts",
        "Delivery attempts over every endpoint (deleted ones too), by what followed "
        "(ack, retry, dead, disable)",
        labels=["outcome"],
    )
    for outcome, count in sorted(summary.attempts.items()):
        attempts.add_metric([outcome], count)
    yield attempts
    statuses = CounterMetricFamily(
        "brook_delivery_all_responses",
        "Delivery attempts over every endpoint by HTTP status, or by error kind when "
        "there was none",
        labels=["status"],
    )
    for status, count in sorted(summary.statuses.items()):
        statuses.add_metric([status], count)
    yield statuses
    yield HistogramMetricFamily(
        "brook_delivery_all_latency_seconds",
        "How long delivery attempts took, over every endpoint",
        buckets=_cumulative(summary.latency_s),
        sum_value=summary.latency_s.sum,
    )
    yield GaugeMetricFamily(
        "brook_delivery_all_in_flight",
        "Delivery attempts in flight over every endpoint",
        value=summary.in_flight,
    )
    yield GaugeMetricFamily(
        "brook_delivery_all_backlog",
        "Records waiting to be delivered (ready, leased or retrying) over every endpoint",
        value=summary.backlog,
    )
    endpoints = GaugeMetricFamily(
        "brook_delivery_endpoints",
        "Endpoints by state: healthy; failing (enabled, and its breaker not closed, its "
        "attempts failing since the last success, or the broker's own work for it "
        "failing); disabled",
        labels=["state"],
    )
    for state, count in summary.endpoints.items():
        endpoints.add_metric([state], count)
    yield endpoints
    breakers = GaugeMetricFamily(
        "brook_delivery_breakers",
        "Endpoints by the state of their circuit breaker (closed, open, half_open)",
        labels=["state"],
    )
    for state, count in summary.breakers.items():
        breakers.add_metric([state], count)
    yield breakers
    yield GaugeMetricFamily(
        "brook_delivery_endpoints_left_out",
        "Endpoints failing or chosen (metrics_endpoints) past the "
        f"{limits.metrics_endpoints_shown_max} given series of their own: they are in "
        "brook_delivery_all_* and brook_delivery_endpoints only",
        value=summary.left_out,
    )


def _cumulative(histogram: Histogram) -> list[tuple[str, float]]:
    """A histogram's buckets as Prometheus has them: cumulative, the last +Inf."""
    buckets: list[tuple[str, float]] = []
    total = 0
    bounds = [*map(str, histogram.bounds), "+Inf"]
    for bound, count in zip(bounds, histogram.counts, strict=True):
        total += count
        buckets.append((bound, total))
    return buckets


class ConnectionsCollector(Collector):
    """Back-pressure and limits at the HTTP edge (inflight_bytes_max, connections_max,
    the header and body timeouts)."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections

    def collect(self) -> Iterator[Metric]:
        c = self.connections
        yield GaugeMetricFamily(
            "brook_http_request_bytes_held",
            "Request-body bytes held in memory now (capped at inflight_bytes_max)",
            value=c.held_bytes,
        )
        yield GaugeMetricFamily(
            "brook_http_request_bytes_held_peak",
            "The most request-body bytes held in memory at once since the server started",
            value=c.held_bytes_peak,
        )
        yield CounterMetricFamily(
            "brook_http_requests_refused_overloaded",
            "Requests answered 503 unread because inflight_bytes_max was reached",
            value=c.refused,
        )
        yield CounterMetricFamily(
            "brook_http_connections_refused",
            "Connections answered 503 because connections_max were open",
            value=c.refused_connections,
        )
        yield CounterMetricFamily(
            "brook_http_requests_timed_out",
            "Requests answered 408: headers or body slower than header_timeout_s, body_timeout_s",
            value=c.timed_out,
        )
        yield GaugeMetricFamily(
            "brook_http_connections_open", "Connections open now", value=len(c.open)
        )


def registry_for(broker: Broker, requests: RequestCounts) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrookCollector(broker, requests))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return bytes(generate_latest(registry))
