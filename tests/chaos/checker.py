"""The promises a chaos run checks, read from its history and the final state alone
(docs/GUARANTEES.md, QUEUES.md, TIMERS.md, DELIVERY.md). Pure: no process, no clock.

final = {
  "logs": {topic: {partition: [{"offset", "value", "key", "timestamp", "headers"}]}},
  "queue": the ordered group's counts by state,
  "faults": [[start, end, kind], ...] in the history's clock,
}
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Any, NamedTuple

from tests.chaos.workload import EVENTS, ORDERS, TIMERS

PROGRESS_S = 20.0
"""Longest stretch without an acknowledged append while no fault is on (nor just over)."""
RECOVERY_S = 15.0
"""After a fault ends, the time a restart and its clients' reconnections may take."""

Event = dict[str, Any]


class Violation(NamedTuple):
    promise: str
    detail: str
    excerpt: list[Event]


def check(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    found: list[Violation] = []
    for rule in (
        acknowledged_appends_are_kept,
        offsets_are_dense,
        idempotency_keys_append_once,
        no_server_errors_but_documented_ones,
        the_queue_finishes_every_record,
        ordered_keys_are_leased_in_order,
        every_event_is_delivered_signed,
        timers_fire_once_and_never_early,
        progress_while_nothing_is_faulted,
    ):
        found.extend(rule(events, final))
    return found


def _appends(events: list[Event]) -> list[Event]:
    return [e for e in events if e["kind"] == "append"]


def acknowledged_appends_are_kept(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    out = []
    logs = final["logs"]
    for e in _appends(events):
        if e["status"] != 200:
            continue
        records = logs.get(e["topic"], {}).get(str(e["partition"]), [])
        found = next((r for r in records if r["offset"] == e["offset"]), None)
        if found is None or found["value"] != e["value"]:
            out.append(
                Violation(
                    "no acknowledged record lost or changed",
                    f"{e['topic']}/{e['partition']}@{e['offset']} was acknowledged for "
                    f"{e['value']!r}; the log holds {None if found is None else found['value']!r}",
                    [e],
                )
            )
    return out


def offsets_are_dense(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    out = []
    for topic, partitions in final["logs"].items():
        for partition, records in partitions.items():
            offsets = [r["offset"] for r in records]
            if offsets != list(range(len(offsets))):
                gaps = sorted(set(range(max(offsets, default=-1) + 1)) - set(offsets))[:5]
                out.append(
                    Violation(
                        "offsets are dense from 0",
                        f"{topic}/{partition}: missing {gaps}, {len(offsets)} records",
                        [],
                    )
                )
    return out


def idempotency_keys_append_once(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    """Producers retry an unknown outcome with the same key: each value at most once."""
    out = []
    for topic in (ORDERS, *EVENTS):
        counts = Counter(
            r["value"] for records in final["logs"].get(topic, {}).values() for r in records
        )
        for value, n in counts.items():
            if n > 1:
                tried = [e for e in _appends(events) if e["value"] == value]
                out.append(
                    Violation(
                        "an idempotency key appends once",
                        f"{value!r} is in {topic} {n} times",
                        tried,
                    )
                )
    return out


def no_server_errors_but_documented_ones(
    events: list[Event], final: dict[str, Any]
) -> list[Violation]:
    """5xx only as 503 (storage or overload, documented), and never corrupt_data."""
    out = []
    for e in events:
        status = e.get("status")
        if e["kind"] == "delivery" or status is None or status < 500:
            continue
        if status != 503 or e.get("code") == "corrupt_data":
            out.append(
                Violation(
                    "no 5xx but the documented 503s",
                    f"{e['kind']} answered {status} {e.get('code')}",
                    [e],
                )
            )
    return out


def the_queue_finishes_every_record(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    counts = final["queue"]
    total = sum(len(r) for r in final["logs"].get(ORDERS, {}).values())
    unfinished = {s: counts.get(s, 0) for s in ("ready", "leased", "retrying", "dead")}
    if any(unfinished.values()) or counts.get("acked", 0) != total:
        return [
            Violation(
                "a queue group finishes every record (at least once)",
                f"{total} records in {ORDERS}; the group counts {counts}",
                [],
            )
        ]
    return []


def ordered_keys_are_leased_in_order(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    """ordering="key": a key's records are first leased in offset order."""
    first: dict[tuple[int, int], float] = {}
    keys: dict[tuple[int, int], str] = {}
    for e in events:
        if e["kind"] != "lease":
            continue
        for partition, offset, key, _ in e["jobs"]:
            first.setdefault((partition, offset), e["t"])
            keys[(partition, offset)] = key
    by_key: dict[tuple[int, str], list[tuple[int, float]]] = defaultdict(list)
    for (partition, offset), at in first.items():
        by_key[(partition, keys[(partition, offset)])].append((offset, at))
    out = []
    for (partition, key), leased in by_key.items():
        leased.sort()
        for (o1, t1), (o2, t2) in itertools.pairwise(leased):
            if t2 < t1:
                out.append(
                    Violation(
                        "a key's records are leased one at a time, in offset order",
                        f"key {key} in partition {partition}: offset {o2} first leased "
                        f"{t1 - t2:.3f} s before offset {o1}",
                        [e for e in events if e["kind"] == "lease" and e["t"] in (t1, t2)],
                    )
                )
    return out


def every_event_is_delivered_signed(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    out = []
    deliveries = [e for e in events if e["kind"] == "delivery"]
    for e in deliveries:
        expected_id = f"{e['topic']}:{e['partition']}:{e['offset']}"
        if not e["signed"] or e["id"] != expected_id or e["topic"] not in EVENTS:
            out.append(
                Violation(
                    "every delivery signed, for the endpoint's own topics",
                    f"{e['endpoint']} got {e['id']} (signed: {e['signed']})",
                    [e],
                )
            )
    answered = {(e["endpoint"], e["id"]) for e in deliveries if e["status"] == 200}
    for topic in EVENTS:
        for partition, records in final["logs"].get(topic, {}).items():
            for r in records:
                message = f"{topic}:{partition}:{r['offset']}"
                for endpoint in ("healthy", "flaky"):
                    if (endpoint, message) not in answered:
                        out.append(
                            Violation(
                                "every record delivered to every matching endpoint, at least once",
                                f"{endpoint} never took {message} ({r['value']!r})",
                                [e for e in deliveries if e["id"] == message],
                            )
                        )
    for e in deliveries:
        found = next(
            (
                r
                for r in final["logs"].get(e["topic"], {}).get(str(e["partition"]), [])
                if r["offset"] == e["offset"]
            ),
            None,
        )
        if found is not None and found["value"] != e["body"]:
            out.append(
                Violation(
                    "a delivery carries the record as stored",
                    f"{e['id']}: sent {e['body']!r}, stored {found['value']!r}",
                    [e],
                )
            )
    return out


def timers_fire_once_and_never_early(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    """A scheduler sends an unanswered timer again under its id (the first schedule of
    an id is kept): the id fires once if any of its calls was acknowledged, at most once
    otherwise, and never before the earliest due time its calls asked for."""
    fired: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for records in final["logs"].get(TIMERS, {}).values():
        for r in records:
            fired[r["value"]].append(r)
    calls: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e["kind"] == "timer":
            calls[e["timer"]].append(e)
    out = []
    for timer, tried in calls.items():
        got = fired.get(timer, [])
        acked = any(e["status"] == 200 for e in tried)
        if len(got) > 1 or (acked and not got):
            out.append(
                Violation(
                    "an acknowledged timer fires exactly once (any other at most once)",
                    f"timer {timer} fired {len(got)} times",
                    tried,
                )
            )
        due = min(e["sent_ms"] + e["delay_ms"] for e in tried)
        for r in got:
            if r["timestamp"] < due:
                out.append(
                    Violation(
                        "a timer never fires early",
                        f"timer {timer} fired {due - r['timestamp']} ms early",
                        tried,
                    )
                )
    return out


def progress_while_nothing_is_faulted(
    events: list[Event], final: dict[str, Any]
) -> list[Violation]:
    acks = sorted(e["t"] for e in _appends(events) if e["status"] == 200)
    if not events:
        return []
    start, end = events[0]["t"], final.get("clients_stopped", events[-1]["t"])
    faulted = [(s, e + RECOVERY_S) for s, e, _ in final["faults"]]
    out = []
    marks = [start, *acks, end]
    for a, b in itertools.pairwise(marks):
        if b - a <= PROGRESS_S:
            continue
        if any(s < b and a < e for s, e in faulted):
            continue
        out.append(
            Violation(
                "progress: appends are acknowledged while nothing is faulted",
                f"no acknowledged append for {b - a:.1f} s",
                [e for e in events if a <= e["t"] <= b][:20],
            )
        )
    return out
