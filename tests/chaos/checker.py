"""The promises a chaos run checks, read from its history and the final state alone
(docs/GUARANTEES.md, QUEUES.md, TIMERS.md, DELIVERY.md). Pure: no process, no clock.

final = {
  "logs": {topic: {partition: [{"offset", "value", "key", "timestamp", "headers"}]}},
  "queue": the ordered group's counts by state,
  "faults": [[start, end, kind, worker pid, clock step s], ...] in the history's clock,
}

A clock step moves the broker's wall clock (docs/GUARANTEES.md: timers, leases and
delays follow it); the checks of times measured on that clock allow for the steps
that overlapped what they look at, and no more.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Any, NamedTuple

from tests.chaos.workload import CALL_TIMEOUT_S as CALL_S
from tests.chaos.workload import EVENTS, ORDERS, TASKS_QUEUE, TIMERS

PROGRESS_S = 20.0
"""Longest stretch without an acknowledged append while no fault is on (nor just over)."""
RECOVERY_S = 15.0
"""After a fault ends, the time a restart and its clients' reconnections may take."""
STEP_TAKES_S = 1.0
"""From the runner's step to the broker's clock moving (a signal, a file read)."""

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
        every_job_runs_its_own_function,
        every_acknowledged_job_finishes,
        no_key_runs_twice_at_once,
        delayed_jobs_never_run_early,
        periodic_jobs_once_per_slot,
        the_lake_equals_the_log,
        the_stream_group_reads_everything_from_its_commits,
        every_acknowledged_chord_calls_back_once,
    ):
        found.extend(rule(events, final))
    return found


def clock_steps_over(final: dict[str, Any], start: float, end: float) -> float:
    """The largest clock step (seconds, either way) in effect at some time in
    [start, end]: how far a time the broker measured then may be off the real one."""
    steps = [
        abs(f[4])
        for f in final["faults"]
        if f[2] == "clock-step" and f[0] <= end and start <= f[1] + STEP_TAKES_S
    ]
    return max(steps, default=0.0)


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
        # Its due time is the broker's clock at the call plus the delay.
        off_ms = 1000 * max(clock_steps_over(final, e["t"] - CALL_S, e["t"]) for e in tried)
        for r in got:
            if r["timestamp"] < due - off_ms:
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
    faulted = [(s, e + RECOVERY_S) for s, e, *_ in final["faults"]]
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


def _enqueued(events: list[Event]) -> dict[str, Event]:
    """The acknowledged enqueues by job reference."""
    return {e["ref"]: e for e in events if e["kind"] == "enqueue" and e["status"] == 200}


def every_job_runs_its_own_function(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    """A job runs only the function it names, with the arguments it was given (tasks
    share a queue: docs/TASKS.md). A job whose enqueue went unanswered is known by its
    task and arguments; the periodic task's by its name."""
    jobs = _enqueued(events)
    calls = {(e["task"], repr(e["args"])) for e in events if e["kind"] == "enqueue"}
    out = []
    for e in events:
        if e["kind"] != "run-start":
            continue
        asked = jobs.get(e["ref"])
        if asked is not None:
            right = e["ran"] == e["task"] == asked["task"] and e["args"] == asked["args"]
        else:
            right = e["ran"] == e["task"] and (
                e["ran"] == "tick" or (e["ran"], repr(e["args"])) in calls
            )
        if not right:
            wanted = "no one's call" if asked is None else f"{asked['task']}{tuple(asked['args'])}"
            out.append(
                Violation(
                    "a job runs only the function it names, with its own arguments",
                    f"{e['ran']}{tuple(e['args'])} ran for {e['ref']} (its record names "
                    f"{e['task']}), enqueued as {wanted}",
                    [e] if asked is None else [asked, e],
                )
            )
    return out


def every_acknowledged_job_finishes(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    """Every acknowledged job is acked in the end, after a run of its own (a flaky job
    after a second or later attempt); an unanswered enqueue sent again under its idempotency
    key makes one job."""
    jobs = _enqueued(events)
    runs: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e["kind"] == "run-start":
            runs[e["ref"]].append(e)
    out = []
    states = final.get("jobs", {})
    for ref, asked in jobs.items():
        state = states.get(ref, {}).get("state")
        ran = runs.get(ref, [])
        attempts = {r["attempt"] for r in ran}
        # The retrying task succeeds at a later attempt than its first (not always the
        # second: a lease handed to a worker killed before it ran ends an attempt too).
        if state != "acked" or not ran or (asked["task"] == "flaky" and max(attempts) < 2):
            out.append(
                Violation(
                    "every acknowledged job runs and is acked (at least once)",
                    f"{ref} ({asked['task']}) is {state}; runs at attempts {sorted(attempts)}",
                    [asked, *ran],
                )
            )
    by_id: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if e["kind"] == "enqueue" and e["ref"]:
            by_id[e["id"]].add(e["ref"])
    for ident, refs in by_id.items():
        if len(refs) > 1:
            out.append(Violation("an idempotency key enqueues one job",
                                 f"{ident} made jobs {sorted(refs)}",
                                 [e for e in events if e.get("id") == ident]))  # fmt: skip
    return out


def no_key_runs_twice_at_once(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    """concurrency_per_key=1: the runs of one key never overlap. A run whose worker was
    killed ends at the kill (its process is gone; its lease runs out after)."""
    killed = {pid: start for start, _, kind, pid, *_ in final["faults"] if kind == "worker-kill9"}
    starts: dict[tuple[str, str, int], Event] = {}
    intervals: dict[str, list[tuple[float, float, Event]]] = defaultdict(list)
    for e in events:
        if e["kind"] not in ("run-start", "run-end") or e.get("key") is None:
            continue
        ident = (e["p"], e["ref"], e["attempt"])
        if e["kind"] == "run-start":
            starts[ident] = e
        elif ident in starts:
            begun = starts.pop(ident)
            intervals[e["key"]].append((begun["t"], e["t"], begun))
    for begun in starts.values():  # never ended: the worker was killed
        pid = int(begun["p"].removeprefix("worker-"))
        intervals[begun["key"]].append((begun["t"], killed.get(pid, begun["t"]), begun))
    out = []
    for key, spans in intervals.items():
        spans.sort(key=lambda span: span[0])
        latest = spans[0]  # the span that ends last of those started so far
        for span in spans[1:]:
            start, end, run = span
            # A clock stepped during the earlier run may end its lease (GUARANTEES.md).
            if start < latest[1] and not clock_steps_over(final, latest[0], latest[1]):
                out.append(
                    Violation(
                        "no key runs above its concurrency limit (1) at any instant",
                        f"key {key}: {run['ref']} started {latest[1] - start:.3f} s before "
                        f"{latest[2]['ref']} ended",
                        [latest[2], run],
                    )
                )
            if end > latest[1]:
                latest = span
    return out


def delayed_jobs_never_run_early(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    """A job enqueued with delay_ms never starts before the send time plus the delay
    (on the broker's clock: by the real one, early by a clock step at most)."""
    jobs = _enqueued(events)
    out = []
    for e in events:
        if e["kind"] == "run-start" and e["ran"] == "later":
            not_before = e["args"][1]
            since = jobs[e["ref"]]["t"] - CALL_S if e["ref"] in jobs else e["t"] - 3600
            not_before -= int(1000 * clock_steps_over(final, since, e["t"]))
            if e["wall_ms"] < not_before:
                out.append(Violation("a delayed job never runs early",
                                     f"{e['ref']} started {not_before - e['wall_ms']} ms early",
                                     [e]))  # fmt: skip
    return out


def periodic_jobs_once_per_slot(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    """The periodic task's schedule enqueues one job per slot, across broker kills."""
    slots: Counter[str] = Counter()
    for records in final["logs"].get(TASKS_QUEUE, {}).values():
        for r in records:
            headers = r.get("headers") or {}
            if headers.get("brook.schedule") is not None:
                slots[str(headers.get("brook.slot_ms"))] += 1
    return [
        Violation("a periodic job is enqueued once per slot", f"slot {slot} has {n} jobs", [])
        for slot, n in sorted(slots.items())
        if n > 1
    ]


def the_lake_equals_the_log(events: list[Event], final: dict[str, Any]) -> list[Violation]:
    """After a sync, each topic's lake (the files its manifest lists) holds the log row
    for row: every offset once, with its value, key and timestamp."""
    out = []
    fields = ("offset", "value", "key", "timestamp")
    for topic, partitions in final["logs"].items():
        lake = final.get("lake", {}).get(topic, {})
        for partition, records in partitions.items():
            want = [{f: r[f] for f in fields} for r in records]
            got = lake.get(partition, [])
            if got != want:
                first = next(
                    (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                    min(len(got), len(want)),
                )
                out.append(
                    Violation(
                        "the lake equals the log, row for row",
                        f"{topic}/{partition}: the lake has {len(got)} rows, the log "
                        f"{len(want)}; first difference at row {first}: lake "
                        f"{got[first] if first < len(got) else None}, log "
                        f"{want[first] if first < len(want) else None}",
                        [],
                    )
                )
    return out


def the_stream_group_reads_everything_from_its_commits(
    events: list[Event], final: dict[str, Any]
) -> list[Violation]:
    """The consumer of the stream group sees every record of its topic (at least
    once), each as stored, and a poll never goes back before an acknowledged commit
    (a committed position is durable through kills)."""
    logs = final["logs"].get(EVENTS[0], {})
    seen: set[tuple[int, int]] = set()
    committed: dict[int, int] = {}
    out = []
    for e in events:
        if e["kind"] == "commit" and e["status"] == 200:
            for partition, offset in e["offsets"].items():
                committed[int(partition)] = max(committed.get(int(partition), 0), offset)
        if e["kind"] != "poll":
            continue
        for partition, offset, value in e["records"]:
            seen.add((partition, offset))
            stored = logs.get(str(partition), [])
            if offset >= len(stored) or stored[offset]["value"] != value:
                out.append(Violation("a stream group reads records as stored",
                                     f"{partition}@{offset}: polled {value!r}", [e]))  # fmt: skip
        firsts: dict[int, int] = {}
        for partition, offset, _ in e["records"]:
            firsts.setdefault(partition, offset)
        for partition, first in firsts.items():
            if first < committed.get(partition, 0):
                out.append(
                    Violation(
                        "a committed position is never lost",
                        f"partition {partition}: a poll began at {first} after a commit "
                        f"of {committed[partition]} was acknowledged",
                        [e],
                    )
                )
    for partition, records in logs.items():
        missing = [r["offset"] for r in records if (int(partition), r["offset"]) not in seen]
        if missing:
            out.append(
                Violation(
                    "a stream group reads every record (at least once)",
                    f"{EVENTS[0]}/{partition}: {len(missing)} never polled, first {missing[:5]}",
                    [],
                )
            )
    return out


def every_acknowledged_chord_calls_back_once(
    events: list[Event], final: dict[str, Any]
) -> list[Violation]:
    """A chord whose enqueue was answered calls back: one callback job (the join is
    counted in the broker, so kills neither lose it nor make two), run with every
    member's result in order, and acked. A chord enqueue that went unanswered may have
    run or not, but never calls back twice either."""
    callbacks: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e["kind"] == "chord-callback":
            callbacks[e["chord"]].append(e)
    states = final.get("jobs", {})
    out = []
    for e in events:
        if e["kind"] != "chord":
            continue
        ran = callbacks.get(e["chord"], [])
        jobs = {r["ref"] for r in ran}
        if len(jobs) > 1:
            out.append(Violation("a chord's callback is enqueued once",
                                 f"{e['chord']}'s callback ran as jobs {sorted(jobs)}", [e, *ran]))  # fmt: skip
        if e["status"] != 200:
            continue
        state = states.get(e["ref"], {}).get("state")
        wrong = [r for r in ran if r["results"] != e["expected"]]
        if state != "acked" or not ran or wrong:
            out.append(
                Violation(
                    "an acknowledged chord calls back with every result, and is acked",
                    f"{e['chord']} ({e['ref']}) is {state}; callback runs {len(ran)}, "
                    f"with other results {len(wrong)}",
                    [e, *ran],
                )
            )
    return out
