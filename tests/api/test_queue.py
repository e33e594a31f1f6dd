"""Queue groups (SPEC §1, §3): embedded (disk, memory, S3) and remote (HTTP, the
Python client) pass the same tests."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

import brook
from brook.errors import BadRequest, InvalidName, LeaseExpired, PartitionNotFound
from brook.records import Record
from tests.waiting import slow


def _fill(broker: Any, topic: str, values: list[bytes], key: bytes | None = None) -> None:
    broker.topic(topic).append_many([Record(v, key=key) for v in values])


def _lease_all(queue: Any, want: int, timeout: float = 5.0) -> list[brook.Job]:
    jobs: list[brook.Job] = []
    deadline = time.monotonic() + slow(timeout)
    while len(jobs) < want and time.monotonic() < deadline:
        jobs.extend(queue.lease(max_records=want - len(jobs), timeout=0.2))
    return jobs


def test_lease_hands_out_each_record_once_and_ack_finishes_it(broker: Any) -> None:
    _fill(broker, "jobs", [b"a", b"b", b"c"])
    q = broker.queue("jobs", "workers")
    jobs = q.lease(max_records=10, timeout=1.0)
    assert [j.record.value for j in jobs] == [b"a", b"b", b"c"]
    assert [j.attempt for j in jobs] == [1, 1, 1]
    assert len({j.receipt for j in jobs}) == 3
    assert q.lease(max_records=10, timeout=0) == []
    q.ack(jobs)
    stats = q.stats()
    assert {k: stats[k] for k in ("ready", "leased", "retrying", "dead", "acked")} == {
        "ready": 0,
        "leased": 0,
        "retrying": 0,
        "dead": 0,
        "acked": 3,
    }
    assert q.lease(max_records=10, timeout=0.1) == []


def test_a_receipt_is_good_for_one_settlement(broker: Any) -> None:
    _fill(broker, "jobs", [b"a", b"b"])
    q = broker.queue("jobs", "workers")
    first, second = q.lease(max_records=2)
    q.ack(first)
    with pytest.raises(LeaseExpired):
        q.ack(first)
    with pytest.raises(LeaseExpired):
        q.nack(first.receipt)
    # A batch with one stale receipt settles the live ones and names the stale one.
    with pytest.raises(LeaseExpired, match="1 of 2"):
        q.ack([first, second])
    assert q.stats()["acked"] == 2


def test_settling_no_records_does_nothing_embedded_and_remote_alike(broker: Any) -> None:
    _fill(broker, "jobs", [b"a"])
    q = broker.queue("jobs", "workers")
    (job,) = q.lease(max_records=1)
    q.ack([])  # a worker whose whole lease failed acks an empty list
    q.nack([], delay_ms=0)
    assert q.stats()["leased"] == 1
    q.ack(job)
    assert q.stats()["acked"] == 1


def test_an_expired_lease_comes_back_with_its_attempt_counted(broker: Any) -> None:
    _fill(broker, "jobs", [b"a"])
    q = broker.queue("jobs", "workers", visibility_timeout_ms=200)
    (job,) = q.lease(max_records=1)
    (again,) = q.lease(max_records=1, timeout=3.0)
    assert again.record.offset == job.record.offset and again.attempt == 2
    with pytest.raises(LeaseExpired):
        q.ack(job)
    q.ack(again)


def test_extend_keeps_a_lease_past_its_timeout(broker: Any) -> None:
    _fill(broker, "jobs", [b"a"])
    q = broker.queue("jobs", "workers")
    (job,) = q.lease(max_records=1, visibility_timeout_ms=300)
    q.extend(job, 5_000)
    time.sleep(0.5)
    assert q.lease(max_records=1, timeout=0) == []
    q.ack(job)


def test_nack_retries_then_the_last_attempt_goes_to_the_dead_letter_topic(broker: Any) -> None:
    broker.topic("jobs").append(b"payload", key=b"k", headers={"trace": b"t1"})
    q = broker.queue("jobs", "workers", max_attempts=2)
    (job,) = q.lease(max_records=1)
    q.nack(job, delay_ms=0, reason="first failure")
    (retry,) = q.lease(max_records=1, timeout=2.0)
    assert retry.attempt == 2
    q.nack(retry, delay_ms=0, reason="second failure")
    assert q.stats()["dead"] == 1
    assert q.lease(max_records=1, timeout=0.1) == []
    (dead,) = broker.topic("jobs.dlq").read(0, 0, 10)
    assert dead.value == b"payload" and dead.key == b"k"
    assert dead.headers is not None
    assert dead.headers["trace"] == b"t1"
    assert dead.headers["brook.origin.topic"] == b"jobs"
    assert dead.headers["brook.origin.partition"] == b"0"
    assert dead.headers["brook.origin.offset"] == str(job.record.offset).encode()
    assert dead.headers["brook.attempts"] == b"2"
    assert dead.headers["brook.error"] == b"second failure"
    states = [t.state.value for t in q.trace(0, job.record.offset)]
    assert states == ["leased", "retrying", "ready", "leased", "dead"]


def test_nack_without_a_delay_waits_for_the_backoff(broker: Any) -> None:
    _fill(broker, "jobs", [b"a"])
    q = broker.queue("jobs", "workers", backoff={"min_ms": 600, "jitter": 0.0})
    (job,) = q.lease(max_records=1)
    started = time.monotonic()
    q.nack(job)
    assert q.stats()["retrying"] == 1
    (retry,) = q.lease(max_records=1, timeout=5.0)
    assert time.monotonic() - started >= 0.55
    assert retry.attempt == 2


def test_release_later_gives_a_job_back_after_its_delay_with_no_attempt_spent(
    broker: Any,
) -> None:
    _fill(broker, "jobs", [b"a"])
    q = broker.queue("jobs", "workers", max_attempts=1)
    (job,) = q.lease(max_records=1)
    assert job.attempt == 1
    started = time.monotonic()
    q.release(job, delay_ms=200, reason="no task named refund here")
    early = q.lease(max_records=1, timeout=0)
    assert early == [] or time.monotonic() - started >= 0.2, "leased before its delay"
    (again,) = early or q.lease(max_records=1, timeout=5.0)
    assert time.monotonic() - started >= 0.19
    assert (again.record.offset, again.attempt) == (job.record.offset, 1)
    with pytest.raises(LeaseExpired):
        q.release(job)  # its lease ended with the release
    q.ack(again)  # max_attempts=1, yet the released lease spent none
    trace = q.trace(0, job.record.offset)
    assert [(t.state.value, t.attempt) for t in trace] == [
        ("leased", 1),
        ("retrying", 0),
        ("ready", 0),
        ("leased", 1),
        ("acked", 1),
    ]
    assert trace[1].reason == "no task named refund here"
    assert trace[1].until_ms - trace[1].at_ms == 200
    assert q.trace(0, 10**9) == [], "a record not there yet has no transitions"
    with pytest.raises(PartitionNotFound):
        q.trace(7, 0)  # as q.job says, on every surface


def test_release_at_once_keeps_the_attempt_count_and_the_last_error(broker: Any) -> None:
    _fill(broker, "jobs", [b"a"])
    q = broker.queue("jobs", "workers")
    (job,) = q.lease(max_records=1)
    q.nack(job, delay_ms=0, reason="flaky")
    (second,) = q.lease(max_records=1, timeout=2.0)
    assert second.attempt == 2
    with pytest.raises(BadRequest):
        q.release(second, delay_ms=-1)
    q.release(second)
    info = q.job(0, job.record.offset)
    assert (info.state, info.attempt, info.error) == ("ready", 1, "flaky")
    (third,) = q.lease(max_records=1, timeout=0)
    assert third.attempt == 2
    q.release([], delay_ms=100)  # nothing to release: no call at all
    q.ack(third)


def test_discard_is_dead_at_once_and_redrive_brings_it_back(broker: Any) -> None:
    _fill(broker, "jobs", [b"a", b"b"])
    q = broker.queue("jobs", "workers", dead_letter_topic="graveyard")
    jobs = q.lease(max_records=2)
    q.discard(jobs, reason="poison")
    assert q.stats()["dead"] == 2
    assert [r.headers["brook.error"] for r in broker.topic("graveyard").read(0, 0, 10)] == [
        b"poison",
        b"poison",
    ]
    assert q.redrive(limit=1) == 1
    assert q.redrive() == 1
    assert q.redrive() == 0  # idempotent: nothing is dead any more
    again = _lease_all(q, 2)
    assert sorted(j.record.value for j in again) == [b"a", b"b"]
    assert [j.attempt for j in again] == [1, 1]  # attempts count afresh
    q.ack(again)
    assert q.stats()["acked"] == 2


def test_dead_records_are_listed_by_the_error_they_died_of(broker: Any) -> None:
    """What failed and why, on every surface (a table row served by the generic adapter)."""
    _fill(broker, "jobs", [b"a", b"b", b"c", b"d", b"e"])
    q = broker.queue("jobs", "workers", max_attempts=1)
    jobs = _lease_all(q, 5)
    for job in jobs[:3]:
        q.discard(job, reason=f"no customer {job.record.offset + 100}")
    q.discard(jobs[3], reason="HTTP 503")
    q.ack(jobs[4])
    errors = q.dead_errors()
    assert [(e.group, e.dead) for e in errors] == [("no customer N", 3), ("HTTP 503", 1)]
    assert errors[0].example == "no customer 100"
    first = q.dead_records("no customer N", limit=2)
    assert [(d.partition, d.offset, d.attempts, d.error) for d in first] == [
        (0, 0, 1, "no customer 100"),
        (0, 1, 1, "no customer 101"),
    ]
    rest = q.dead_records("no customer N", after=(first[-1].partition, first[-1].offset))
    assert [d.offset for d in rest] == [2]
    assert q.dead_records("nothing died of this") == []
    # A page goes on after its `after` even once that record is redriven (or never was
    # one of the group's): by place, never from the start again.
    assert q.redrive(records=[(0, 1)]) == 1
    assert [d.offset for d in q.dead_records("no customer N", after=(0, 1))] == [2]
    assert [d.offset for d in q.dead_records("no customer N", after=(0, 3))] == []
    assert [d.offset for d in q.dead_records("no customer N", after=(0, 0))] == [2]
    for bad in ({"after": (0, -1)}, {"after": "x"}, {"limit": 0}):
        with pytest.raises(BadRequest):
            q.dead_records("HTTP 503", **bad)
    for error in (123, b"HTTP 503", ["HTTP 503"], "x" * 100_000, ""):
        with pytest.raises(BadRequest):
            q.dead_records(error)


def test_redrive_of_chosen_records_touches_only_the_dead_among_them(broker: Any) -> None:
    _fill(broker, "jobs", [b"a", b"b", b"c", b"d"])
    q = broker.queue("jobs", "workers", visibility_timeout_ms=60_000)
    jobs = sorted(_lease_all(q, 4), key=lambda j: j.record.offset)
    q.discard(jobs[:3], reason="poison")
    # Offset 1 is dead, offset 3 is leased, offset 9 does not exist: only 1 comes back.
    assert q.redrive(records=[(0, 1), (0, 3), (0, 9)]) == 1
    assert q.redrive(records=[(0, 1)]) == 0  # idempotent
    assert q.stats()["dead"] == 2 and q.stats()["ready"] == 1
    (again,) = q.lease(max_records=5, timeout=0)
    assert (again.record.offset, again.attempt) == (1, 1)
    assert q.redrive(records=[]) == 0
    with pytest.raises(BadRequest):
        q.redrive(records=[(0, -1)])
    with pytest.raises(BadRequest):
        q.redrive(records="0:1")


def test_cancel_takes_waiting_records_out_for_good_and_leaves_the_others(broker: Any) -> None:
    topic = broker.topic("jobs")
    for value, key in [(b"a", b"k1"), (b"b", b"k2"), (b"c", b"k1"), (b"d", None)]:
        topic.append(value, key=key)
    later = topic.append(b"later", headers=brook.scheduling.headers(delay_ms=3_600_000))
    q = broker.queue("jobs", "workers", visibility_timeout_ms=60_000, max_attempts=3)
    (first,) = q.lease(max_records=1, timeout=5)  # offset 0 is out
    q.nack(first, delay_ms=60_000)  # and now waits to retry
    (leased,) = q.lease(max_records=1, timeout=5)  # offset 1 is out
    assert leased.record.offset == 1
    # Waiting (retrying, ready, delayed) ones are cancelled; the leased one, an unknown
    # offset and a repeat are left.
    done = q.cancel(records=[(0, 0), (0, 1), (0, 3), (0, later.offset), (0, 99)], reason="nope")
    assert done == [(0, 0), (0, 3), (0, later.offset)]
    assert q.cancel(records=[(0, 0)]) == []  # idempotent
    assert q.job(0, 0).state == "dead" and q.job(0, 0).error == "nope"
    assert q.job(0, 1).state == "leased"
    # By key: every waiting record of k1 (offset 2; offset 0 is dead already).
    assert q.cancel(key="k1") == [(0, 2)]
    assert q.job(0, 2).error == "cancelled"
    q.ack(leased)
    assert q.lease(max_records=10, timeout=0) == []  # nothing cancelled is handed out
    stats = q.stats()
    assert (stats["dead"], stats["acked"], stats["ready"], stats["delayed"]) == (4, 1, 0, 0)
    assert q.redrive(records=[(0, 3)]) == 1  # a redrive brings one back
    (again,) = q.lease(max_records=10, timeout=5)
    assert again.record.value == b"d"
    with pytest.raises(BadRequest, match="one of them"):
        q.cancel()
    with pytest.raises(BadRequest, match="one of them"):
        q.cancel(records=[(0, 1)], key="k1")
    with pytest.raises(BadRequest):
        q.cancel(records=[(0, -1)])


def test_records_appended_while_waiting_are_leased(broker: Any) -> None:
    q = broker.queue("jobs", "workers")
    appender = threading.Timer(0.3, lambda: broker.topic("jobs").append(b"late"))
    appender.start()
    try:
        jobs = q.lease(max_records=5, timeout=5.0)
    finally:
        appender.join()
    assert [j.record.value for j in jobs] == [b"late"]


def test_key_ordering_holds_back_only_the_retrying_key(broker: Any) -> None:
    broker.topic("jobs").append_many(
        [
            Record(b"a1", key=b"a"),
            Record(b"a2", key=b"a"),
            Record(b"b1", key=b"b"),
            Record(b"b2", key=b"b"),
        ]
    )
    q = broker.queue("jobs", "workers", ordering="key")
    first = q.lease(max_records=10)
    assert sorted(j.record.value for j in first) == [b"a1", b"b1"]  # one per key
    by_value = {j.record.value: j for j in first}
    q.nack(by_value[b"a1"], delay_ms=300)
    q.ack(by_value[b"b1"])
    (b2,) = q.lease(max_records=10, timeout=1.0)
    assert b2.record.value == b"b2"  # a1 retrying holds back a2, not b2
    (a1,) = q.lease(max_records=10, timeout=3.0)
    assert a1.record.value == b"a1" and a1.attempt == 2
    q.ack([a1, b2])
    (a2,) = q.lease(max_records=10, timeout=1.0)
    assert a2.record.value == b"a2"


def test_settings_are_stored_and_none_keeps_them(broker: Any) -> None:
    q = broker.queue("jobs", "workers", max_attempts=3, visibility_timeout_ms=5_000)
    assert q.settings()["max_attempts"] == 3
    again = broker.queue("jobs", "workers", ordering="key")
    settings = again.settings()
    assert settings["max_attempts"] == 3
    assert settings["visibility_timeout_ms"] == 5_000
    assert settings["ordering"] == "key"
    assert settings["dead_letter_topic"] == "jobs.dlq"


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"max_attempts": 0}, BadRequest),
        ({"visibility_timeout_ms": -1}, BadRequest),
        ({"ordering": "random"}, BadRequest),
        ({"dead_letter_topic": "__internal"}, InvalidName),
        ({"dead_letter_topic": "jobs"}, BadRequest),
        ({"backoff": {"min_ms": 10, "factor": 0.5}}, BadRequest),
    ],
)
def test_bad_settings_are_refused(broker: Any, settings: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        broker.queue("jobs", "workers", **settings)


def test_bad_calls_are_refused(broker: Any) -> None:
    q = broker.queue("jobs", "workers")
    with pytest.raises(InvalidName):
        broker.queue("jobs", "bad/name")
    with pytest.raises(BadRequest):
        q.lease(max_records=0)
    with pytest.raises(BadRequest):
        q.ack([3])
    with pytest.raises(BadRequest):
        q.extend("0.0.1.1.abc", 0)
    with pytest.raises(LeaseExpired):
        q.ack("0.0.1.1.00000abc")
    with pytest.raises(BadRequest, match="is not a receipt"):
        q.ack("0.0.1.1.abc")


def test_fairness_a_hot_key_does_not_starve_the_others(broker: Any) -> None:
    """One key with 100,000 ready records, 100 keys with 10 each: with 4 workers,
    every other key has its first record leased within the first 1,000 leases."""
    topic = broker.topic("jobs")
    for start in range(0, 100_000, 10_000):
        topic.append_many([Record(b"h", key=b"hot") for _ in range(start, start + 10_000)])
    topic.append_many(
        [Record(b"c", key=f"cold-{k}".encode()) for k in range(100) for _ in range(10)]
    )
    q = broker.queue("jobs", "workers")
    leased: list[bytes] = []
    mutex = threading.Lock()

    def worker() -> None:
        while True:
            with mutex:
                if len(leased) >= 1_000:
                    return
            jobs = q.lease(max_records=25, timeout=1.0)
            with mutex:
                leased.extend(j.record.key or b"" for j in jobs)
            q.ack(jobs)

    workers = [threading.Thread(target=worker) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    first = Counter(leased[:1_000])
    assert {f"cold-{k}".encode() for k in range(100)} <= set(first)


def test_many_workers_finish_every_record_exactly_once(broker: Any) -> None:
    count = 600
    _fill(broker, "jobs", [str(i).encode() for i in range(count)])
    q = broker.queue("jobs", "workers", max_attempts=3, visibility_timeout_ms=2_000)
    acked: list[int] = []
    mutex = threading.Lock()

    def worker(n: int) -> None:
        idle = 0
        while idle < 3:
            jobs = q.lease(max_records=20, timeout=0.3)
            if not jobs:
                idle += 1
                continue
            idle = 0
            fail = [j for j in jobs if (j.record.offset + n) % 7 == 0 and j.attempt == 1]
            good = [j for j in jobs if j not in fail]
            if fail:
                q.nack(fail, delay_ms=0, reason="flaky")
            q.ack(good)
            with mutex:
                acked.extend(j.record.offset for j in good)

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(acked) == list(range(count))
    stats = q.stats()
    assert (stats["acked"], stats["ready"], stats["leased"], stats["retrying"]) == (count, 0, 0, 0)


@pytest.mark.parametrize("broker", ["local", "remote"], indirect=True)  # waits for a delay
def test_priorities_overtake_queued_work_and_delays_hold_records_back(broker: Any) -> None:
    """Scheduling headers on records (brook.scheduling) are honoured on every surface,
    and bad ones are refused at append with a 400, never stored."""
    t = broker.topic("sched")
    t.append_many([Record(f"low{n}".encode()) for n in range(3)])
    t.append(b"urgent", headers=brook.scheduling.headers(priority=7))
    appended = time.monotonic()
    t.append(b"later", headers=brook.scheduling.headers(delay_ms=700))
    q = broker.queue("sched", "w", lower_priority_share=0)
    assert q.stats()["delayed"] == 1
    first = q.lease(max_records=10, timeout=1.0)
    assert [j.record.value for j in first] == [b"urgent", b"low0", b"low1", b"low2"]
    q.ack(first)
    late = q.lease(max_records=10, timeout=5.0)
    assert [j.record.value for j in late] == [b"later"]
    # Due 700 ms after its append; a busy machine may take most of that to lease and ack
    # the others, so the wait is measured from the append (less the clock's rounding).
    assert time.monotonic() - appended >= 0.6, "a delayed record was leased early"
    with pytest.raises(BadRequest, match=r"brook\.priority"):
        t.append(b"x", headers={"brook.priority": b"urgent"})
    assert t.end_offsets() == {0: 5}


def test_per_key_limits_are_group_settings(broker: Any) -> None:
    _fill(broker, "limited", [b"a1", b"a2", b"a3"], key=b"a")
    _fill(broker, "limited", [b"b1"], key=b"b")
    q = broker.queue("limited", "w", concurrency_per_key=2)
    assert q.settings()["concurrency_per_key"] == 2
    jobs = _lease_all(q, 3)
    assert sorted(j.record.value for j in jobs) == [b"a1", b"a2", b"b1"]
    assert q.lease(max_records=10, timeout=0.2) == []  # a's third waits for one of its two
    q.ack([j for j in jobs if j.record.value == b"a1"])
    assert [j.record.value for j in q.lease(max_records=10, timeout=1.0)] == [b"a3"]
    # A key rate limit, and 0 taking a limit off again.
    q = broker.queue("limited", "w", concurrency_per_key=0, key_rate_limit_per_s=2.5)
    assert q.settings()["concurrency_per_key"] is None
    assert q.settings()["key_rate_limit_per_s"] == 2.5
    with pytest.raises(BadRequest, match="concurrency_per_key"):
        broker.queue("limited", "w", ordering="key", concurrency_per_key=3)
    with pytest.raises(BadRequest, match="lower_priority_share"):
        broker.queue("limited", "w", lower_priority_share=2)


def test_a_job_tells_where_it_stands_and_what_it_returned(broker: Any) -> None:
    _fill(broker, "told", [b"a", b"b", b"c"])
    q = broker.queue("told", "w", max_attempts=1)
    assert q.job(0, 0).state == "ready" and q.job(0, 7).state == "unknown"
    a, b, c = q.lease(max_records=3, timeout=1.0)
    assert q.job(0, 2).state == "leased" and q.job(0, 2).due_ms is not None
    q.ack([a, b], results=[b'{"total": 3}', None])
    q.nack(c, reason="ValueError: no such customer")
    done, plain, failed = (q.job(0, o) for o in range(3))
    assert (done.state, done.attempt, done.result) == ("acked", 1, b'{"total": 3}')
    assert done.acked_ms is not None
    assert (plain.state, plain.result) == ("acked", None)
    assert (failed.state, failed.error) == ("dead", "ValueError: no such customer")
    with pytest.raises(BadRequest, match="one per job"):
        q.ack([a], results=[b"x", b"y"])
