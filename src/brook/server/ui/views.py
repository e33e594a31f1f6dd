"""What each dashboard page shows, read from the broker's public parts: no HTTP,
no HTML. Every figure comes from state the broker keeps (end offsets, segment
sizes, counters), never from a scan of records, so a page costs the same with a
million records as with ten; the record browser reads one page of records (with a
key filter, at most limits.dashboard_key_scan_records_max of them: records are not indexed by key).
"""

from __future__ import annotations

import base64
import collections
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from brook import __version__, limits
from brook.api import ConsumerApi as Consumer
from brook.broker import Broker
from brook.errors import BadRequest, BrookError, NotFound, TopicNotFound
from brook.models import (
    DeliveryStats,
    EndpointInfo,
    ErrorGroup,
    Histogram,
    LakeStatus,
    PartitionInfo,
    Recent,
    Record,
    ScheduleInfo,
    TimerInfo,
    TimerPage,
)


@dataclass
class TopicRow:
    name: str
    partitions: int
    records: int
    """Offsets handed out, over all partitions (records appended, retention aside)."""
    bytes: int
    rate_per_s: float | None
    """Appends per second over the last minute (None until two samples exist)."""
    sparkline: list[float] = field(default_factory=list)


@dataclass
class Overview:
    version: str
    uptime_s: float
    storage: str
    read_only: bool
    failing: list[tuple[str, str]]
    """(loop, error) of every background loop failing now."""
    topics: list[TopicRow]
    """The page's topics: busiest first (appends per second), then by name."""
    matched: int = 0
    """How many topics the filter kept (over every page)."""
    records: int = 0
    """Records appended to those topics, in all."""
    page: int = 1
    pages: int = 1


class Rates:
    """Every topic's end offsets and every queue group's finished records, sampled
    every limits.dashboard_rate_every_s (by the dashboard's ticker), for rates per second and the
    sparklines of the last minute."""

    def __init__(self) -> None:
        self.samples: collections.deque[tuple[float, dict[str, int]]] = collections.deque(
            maxlen=limits.dashboard_rate_samples
        )

    def sample(self, broker: Broker, now_s: float | None = None) -> None:
        totals = {t.name: sum(t.end_offsets.values()) for t in broker.topics()}
        for group in broker.queue_groups():
            counts = group.counts()
            totals[f"{group.topic}\0{group.group}"] = counts["acked"] + counts["dead"]
        self.samples.append((time.monotonic() if now_s is None else now_s, totals))

    def out_of(self, topic: str, group: str) -> float | None:
        """A queue group's records finished (acked or dead) per second, last minute."""
        rate, _ = self.of(f"{topic}\0{group}")
        return rate

    def of(self, topic: str) -> tuple[float | None, list[float]]:
        """(appends/s over the samples kept, appends/s between each two samples)."""
        points = [(at, totals[topic]) for at, totals in self.samples if topic in totals]
        if len(points) < 2:
            return None, []
        steps = [
            max(0.0, (b - a) / (tb - ta)) if tb > ta else 0.0
            for (ta, a), (tb, b) in itertools.pairwise(points)
        ]
        (first_at, first), (last_at, last) = points[0], points[-1]
        rate = max(0.0, (last - first) / (last_at - first_at)) if last_at > first_at else 0.0
        return rate, steps


def overview(
    broker: Broker,
    rates: Rates,
    started_s: float,
    storage: str,
    sees: Callable[[str], bool] | None = None,
    name: str = "",
    page: int = 1,
) -> Overview:
    """The broker's facts and one page of the topics the viewer sees (`sees`; all
    without it) whose name holds `name`, busiest first; sizes on disk are read for the
    page's rows only."""
    kept = []
    records = 0
    for info in broker.topics():
        if (sees is not None and not sees(info.name)) or name.lower() not in info.name.lower():
            continue
        rate, steps = rates.of(info.name)
        appended = sum(info.end_offsets.values())
        records += appended
        kept.append((info, appended, rate, steps))
    kept.sort(key=lambda k: (-(k[2] or 0.0), k[0].name))
    pages = max(1, -(-len(kept) // limits.dashboard_topics_per_page))
    page = min(max(1, page), pages)
    rows = [
        TopicRow(
            name=info.name,
            partitions=info.partitions,
            records=appended,
            bytes=sum(p.bytes for p in broker.partitions(info.name)),
            rate_per_s=rate,
            sparkline=steps,
        )
        for info, appended, rate, steps in kept[
            (page - 1) * limits.dashboard_topics_per_page : page * limits.dashboard_topics_per_page
        ]
    ]
    return Overview(
        version=__version__,
        uptime_s=time.monotonic() - started_s,
        storage=storage,
        read_only=broker.read_only,
        failing=[(f.loop, f.error) for f in broker.failing()],
        topics=rows,
        matched=len(kept),
        records=records,
        page=page,
        pages=pages,
    )


@dataclass
class Shown:
    """A record as the browser shows it."""

    partition: int
    offset: int
    timestamp_ms: int
    key: str
    value: str
    value_form: str
    """"text", "hex" or "base64": how `value` shows the bytes."""
    size: int
    cut: bool
    headers: list[tuple[str, str]]


@dataclass
class TopicPage:
    name: str
    partitions: list[PartitionInfo]
    partition: int
    records: list[Shown]
    older: int | None
    """The offset to page back from (None: nothing older is retained)."""
    newer: int | None
    """The offset to page on from (None: at the end)."""
    key_filter: str
    form: str
    scanned: tuple[int, int] | None = None
    """With a key filter: the offsets looked through for this page [from, to)."""
    key_partition: int | None = None
    """With a key filter: the partition records of that key are appended to."""
    lake: LakeStatus | None = None
    """Where the topic's lake stands, when this broker keeps it in one."""


def topic(
    broker: Broker,
    name: str,
    partition: int = 0,
    before: int | None = None,
    key: str = "",
    form: str = "auto",
    at_ms: int | None = None,
) -> TopicPage:
    """One page of a partition's records, newest first, ending before `before` (keyset
    paging by offset: the page costs the same at offset 0 as at a billion), or, with
    `at_ms`, starting at the first record stamped then or later (found in the segments'
    indexes). With `key`, the records of that key, newest first, from a bounded scan
    back from `before` (the records of a key are not indexed)."""
    rows = broker.partitions(name)
    if not 0 <= partition < len(rows):
        raise BadRequest(f"topic {name!r} has partitions 0..{len(rows) - 1}, not {partition}")
    if form not in ("auto", "text", "hex", "base64"):
        raise BadRequest("form is one of auto, text, hex, base64")
    log = rows[partition]
    if at_ms is not None:
        before = broker.offset_at(name, partition, at_ms) + limits.dashboard_records_per_page
    end = log.end_offset if before is None else max(0, min(before, log.end_offset))
    newer = end + limits.dashboard_records_per_page if end < log.end_offset else None
    if key:
        wanted = key.encode()
        start, of_key = broker.records_of_key(
            name,
            partition,
            wanted,
            end,
            limits.dashboard_records_per_page,
            limits.dashboard_key_scan_records_max,
        )
        found = [_shown(record, form) for record in of_key]
        return TopicPage(
            name=name,
            partitions=rows,
            partition=partition,
            records=found,
            older=start if start > log.start_offset else None,
            newer=newer,
            key_filter=key,
            form=form,
            scanned=(start, end),
            key_partition=broker.partition_of_key(name, wanted),
            lake=_lake_of(broker, name),
        )
    start = max(log.start_offset, end - limits.dashboard_records_per_page)
    shown = [_shown(r, form) for r in broker.records_between(name, partition, start, end)]
    return TopicPage(
        name=name,
        partitions=rows,
        partition=partition,
        records=shown[::-1],
        older=start if start > log.start_offset else None,
        newer=newer,
        key_filter=key,
        form=form,
        lake=_lake_of(broker, name),
    )


def _lake_of(broker: Broker, name: str) -> LakeStatus | None:
    """The topic's lake, when this broker keeps it in one (from the writer's memory:
    a page of a topic without a lake reads nothing more)."""
    if not broker.lake_holds(name):
        return None
    return broker.lake_status(name)[0]


def _shown(record: Record, form: str) -> Shown:
    value = record.value
    text = None
    if form in ("auto", "text"):
        try:
            text = value.decode()
        except UnicodeDecodeError:
            text = None
    if text is not None:
        shown, how = text, "text"
    elif form == "base64":
        shown, how = base64.b64encode(value).decode(), "base64"
    else:
        shown, how = value.hex(" "), "hex"
    key = ""
    if record.key is not None:
        try:
            key = record.key.decode()
        except UnicodeDecodeError:
            key = "0x" + record.key.hex()
    headers = [
        (name, raw.decode("utf-8", "replace")[:100]) for name, raw in (record.headers or {}).items()
    ]
    return Shown(
        partition=record.partition,
        offset=record.offset,
        timestamp_ms=record.timestamp,
        key=key,
        value=shown[: limits.dashboard_value_chars_shown],
        value_form=how,
        size=len(value),
        cut=len(shown) > limits.dashboard_value_chars_shown,
        headers=headers,
    )


# ---------------------------------------------------------------- queue groups


@dataclass
class QueueRow:
    topic: str
    group: str
    counts: dict[str, int]
    out_per_s: float | None
    """Records finished (acked or dead) per second over the last minute."""


def queue_rows(broker: Broker, rates: Rates) -> list[QueueRow]:
    """Every queue group but the broker's own (delivery's, shown with their endpoints)."""
    rows = []
    for group in broker.queue_groups():
        if group.group.startswith("__"):
            continue
        counts = group.counts()
        rows.append(
            QueueRow(group.topic, group.group, counts, rates.out_of(group.topic, group.group))
        )
    return sorted(rows, key=lambda row: (row.topic, row.group))


@dataclass
class DeadShown:
    partition: int
    offset: int
    attempts: int
    error: str
    redriven: int
    record: Shown | None
    """Its key and value, as the topic holds them (None once retention removed it)."""


@dataclass
class QueuePage:
    topic: str
    group: str
    counts: dict[str, int]
    settings: dict[str, object]
    out_per_s: float | None
    in_per_s: float | None
    errors: Sequence[ErrorGroup]
    """The groups of the errors dead records died of (the exception and the task's own
    frame, or the reason with its ids masked), each with how many and one whole error,
    most first (at most limits.dashboard_errors_shown_max)."""
    error_kinds: int
    error: str | None
    """The error group whose records are listed, if one is chosen."""
    example: str
    """The whole error one of its records died of (a traceback, for a task)."""
    dead: list[DeadShown]
    next_after: str | None
    """Where the next page of `dead` starts ("partition.offset"), if there is one."""


def queue(
    broker: Broker, rates: Rates, topic: str, group: str, error: str | None, after: str | None
) -> QueuePage:
    found = broker.find_queue(topic, group)
    if found is None or group.startswith("__"):
        raise NotFound(f"no queue group {group!r} on topic {topic!r}")
    errors = found.dead_errors()
    if error is None and errors:
        error = errors[0].group
    records = (
        found.dead_records(error, _position(after), limits.dashboard_dead_per_page + 1)
        if error is not None
        else []
    )
    shown = [
        DeadShown(
            d.partition,
            d.offset,
            d.attempts,
            d.error,
            d.redriven,
            _record_at(broker, topic, d.partition, d.offset),
        )
        for d in records[: limits.dashboard_dead_per_page]
    ]
    examples = (e.example for e in errors if e.group == error)
    example = next(examples, records[0].error if records else "")
    last = (
        records[limits.dashboard_dead_per_page - 1]
        if len(records) > limits.dashboard_dead_per_page
        else None
    )
    in_rate, _ = rates.of(topic)
    return QueuePage(
        topic=topic,
        group=group,
        counts=found.counts(),
        settings=found.settings(),
        out_per_s=rates.out_of(topic, group),
        in_per_s=in_rate,
        errors=errors[: limits.dashboard_errors_shown_max],
        error_kinds=len(errors),
        error=error,
        example=example,
        dead=shown,
        next_after=f"{last.partition}.{last.offset}" if last is not None else None,
    )


def _record_at(broker: Broker, topic: str, partition: int, offset: int) -> Shown | None:
    """The record at (partition, offset) as the browser shows it; None if it is gone."""
    try:
        found = broker.topic(topic).read(partition, offset, 1)
    except BrookError:
        return None
    if not found or found[0].offset != offset:
        return None
    return _shown(found[0], "auto")


def _position(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    partition, _, offset = text.partition(".")
    if not (partition.isdigit() and offset.isdigit()) or len(text) > 40:
        raise BadRequest(f"a record is named partition.offset, like 0.42, not {text[:40]!r}")
    return int(partition), int(offset)


def positions(texts: list[str]) -> list[tuple[int, int]]:
    """Records named "partition.offset" (the forms' checkboxes)."""
    found = [_position(text) for text in texts]
    return [p for p in found if p is not None]


@dataclass
class TraceShown:
    at_ms: int
    state: str
    attempt: int
    reason: str
    status: int | None
    latency_ms: float | None
    excerpt: str


def trace(broker: Broker, topic: str, group: str, partition: int, offset: int) -> list[TraceShown]:
    found = broker.find_queue(topic, group)
    if found is None:
        raise NotFound(f"no queue group {group!r} on topic {topic!r}")
    return [
        TraceShown(
            at_ms=t.at_ms,
            state=t.state.value,
            attempt=t.attempt,
            reason=t.reason or (t.outcome.error if t.outcome is not None else ""),
            status=t.outcome.status if t.outcome is not None else None,
            latency_ms=t.outcome.latency_ms if t.outcome is not None else None,
            excerpt=t.outcome.excerpt.decode("utf-8", "replace")[:300] if t.outcome else "",
        )
        for t in found.trace(partition, offset)
    ]


# ---------------------------------------------------------------- endpoints


@dataclass
class EndpointRow:
    info: EndpointInfo
    stats: DeliveryStats


ENDPOINT_STATES = ("all", "failing", "disabled", "enabled")


@dataclass
class EndpointsPage:
    rows: list[EndpointRow]
    matched: int
    """How many endpoints the filter kept (over every page)."""
    page: int
    pages: int
    tenants: list[str]


def endpoint_rows(
    broker: Broker,
    reaches: Callable[[EndpointInfo], bool] | None = None,
    name: str = "",
    tenant: str = "",
    state: str = "all",
    page: int = 1,
) -> EndpointsPage:
    """One page of the endpoints the viewer's key reaches (`reaches`; all without one),
    kept by the filter (a part of the name, a tenant, a state), failing ones first, then
    by name; the figures (stats) are read for the page's rows only, so a page costs the
    same at 10,000 endpoints as at 10."""
    if state not in ENDPOINT_STATES:
        raise BadRequest(f"state is one of {', '.join(ENDPOINT_STATES)}, not {state[:40]!r}")
    failing = broker.failing_endpoints()
    kept: list[EndpointInfo] = []
    tenants: set[str] = set()
    for info in broker.endpoints():
        if reaches is not None and not reaches(info):
            continue
        if info.tenant is not None:
            tenants.add(info.tenant)
        if name and name.lower() not in info.name.lower():
            continue
        if tenant and info.tenant != tenant:
            continue
        if state == "failing" and info.name not in failing:
            continue
        if state == "disabled" and info.enabled:
            continue
        if state == "enabled" and not info.enabled:
            continue
        kept.append(info)
    kept.sort(key=lambda i: (i.name not in failing, i.name))
    pages = max(1, -(-len(kept) // limits.dashboard_endpoints_per_page))
    page = min(max(1, page), pages)
    shown = kept[
        (page - 1) * limits.dashboard_endpoints_per_page : page
        * limits.dashboard_endpoints_per_page
    ]
    rows = [EndpointRow(info, broker.endpoint(info.name).stats()) for info in shown]
    return EndpointsPage(rows, len(kept), page, pages, sorted(tenants))


@dataclass
class EndpointPage:
    info: EndpointInfo
    stats: DeliveryStats
    recent: list[Recent]


def endpoint(broker: Broker, name: str) -> EndpointPage:
    handle = broker.endpoint(name)
    info = handle.info()
    return EndpointPage(
        info=info,
        stats=handle.stats(),
        recent=handle.recent(),
    )


# ---------------------------------------------------------------- timers


@dataclass
class TimersPage:
    pending: int
    by_day: list[tuple[int, int]]
    fired: int
    lag_mean_ms: float | None
    lag_p50: str
    lag_p99: str
    """The fire-lag histogram's bound holding the quantile, as text ("" before any)."""
    lookup: str
    found: TimerInfo | None
    schedules: list[ScheduleInfo]
    """The periodic schedules, with their last and next slots."""
    listed: TimerPage
    """A page of the pending timers, earliest due first."""
    topic: str
    """The topic the list is limited to ("" for all)."""


def timers(broker: Broker, lookup: str, topic: str = "", after: str = "") -> TimersPage:
    stats = broker.timer_stats()
    found = broker.timer(lookup) if lookup else None
    return TimersPage(
        listed=broker.list_timers(
            topic or None, after=after or None, limit=limits.dashboard_timers_per_page
        ),
        topic=topic,
        schedules=broker.list_schedules(),
        pending=stats.pending,
        by_day=stats.pending_by_day,
        fired=stats.fired,
        lag_mean_ms=stats.lag_s.sum / stats.fired * 1000 if stats.fired else None,
        lag_p50=_bucket_quantile(stats.lag_s, 0.5),
        lag_p99=_bucket_quantile(stats.lag_s, 0.99),
        lookup=lookup,
        found=found,
    )


def _bucket_quantile(lag_s: Histogram, quantile: float) -> str:
    """Within which bound of the fire-lag histogram `quantile` of timers fired."""
    total = sum(lag_s.counts)
    if not total:
        return ""
    seen = 0
    for bound, count in zip(lag_s.bounds, lag_s.counts, strict=False):
        seen += count
        if seen >= quantile * total:
            return f"within {bound * 1000:g} ms" if bound < 1 else f"within {bound:g} s"
    return f"over {lag_s.bounds[-1]:g} s"


# ---------------------------------------------------------------- stream groups


@dataclass
class StreamRow:
    topic: str
    group: str
    partitions: list[tuple[int, int, int, int, int]]
    """(partition, committed, position, end, lag)."""
    lag: int


class StreamGroups:
    """The stream groups, listed at most every limits.dashboard_groups_listed_s; their positions live."""

    def __init__(self) -> None:
        self._listed_at = -limits.dashboard_groups_listed_s
        self._consumers: Sequence[Consumer] = ()

    def rows(self, broker: Broker) -> list[StreamRow]:
        if time.monotonic() - self._listed_at >= limits.dashboard_groups_listed_s:
            self._consumers = broker.stream_groups(stored=True)
            self._listed_at = time.monotonic()
        rows = []
        for consumer in self._consumers:
            try:
                stored = broker.partitions(consumer.topic)
                committed, position, lag = consumer.committed(), consumer.position(), consumer.lag()
            except TopicNotFound:
                continue
            ends = {p.partition: p.end_offset for p in stored}
            partitions = [
                (p, committed.get(p, 0), position.get(p, 0), ends.get(p, 0), lag.get(p, 0))
                for p in sorted(ends)
            ]
            rows.append(StreamRow(consumer.topic, consumer.group, partitions, sum(lag.values())))
        return rows


# ---------------------------------------------------------------- storage

S3_PRICES = {"put": 0.005 / 1000, "list": 0.005 / 1000, "get": 0.0004 / 1000, "delete": 0.0}
"""US dollars per request at S3 Standard's list prices (us-east-1): PUT, COPY, POST and
LIST $0.005 per 1,000; GET $0.0004 per 1,000; DELETE free."""


@dataclass
class StoragePage:
    object_store: bool
    uptime_s: float
    requests: dict[str, int]
    bytes_sent: int
    bytes_received: int
    cache_hits: int | None
    cache_misses: int | None
    cache_bytes: int | None
    stored_bytes: int
    """The topics' retained segments (what most of the bill's storage is)."""
    cost_per_day: dict[str, float]
    """Estimated US dollars a day, by request kind and "storage", at the pace since start."""
    disk_free_bytes: int | None


def storage(broker: Broker, started_s: float) -> StoragePage:
    uptime = max(time.monotonic() - started_s, 1.0)
    stored = sum(p.bytes for info in broker.topics() for p in broker.partitions(info.name))
    stats = broker.storage_stats()
    per_day = 86400 / uptime
    cost = {
        kind: count * per_day * S3_PRICES.get(kind, 0.0) for kind, count in stats.requests.items()
    }
    if stats.object_store:
        cost["storage"] = stored / 1e9 * limits.s3_usd_per_gb_month / 30
    return StoragePage(
        object_store=stats.object_store,
        uptime_s=uptime,
        requests=stats.requests,
        bytes_sent=stats.bytes_sent,
        bytes_received=stats.bytes_received,
        cache_hits=stats.cache_hits,
        cache_misses=stats.cache_misses,
        cache_bytes=stats.cache_bytes,
        stored_bytes=stored,
        cost_per_day=cost,
        disk_free_bytes=stats.disk_free_bytes,
    )
