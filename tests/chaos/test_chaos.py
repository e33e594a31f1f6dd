"""The whole system under faults (issue 51): seeded chaos runs checked by the history
checker, and the checker itself shown to catch what it looks for.

`make test` runs two short seeds; `make reliability` many long ones
(BROOK_CHAOS_SEEDS=1-50, BROOK_CHAOS_MINUTES=5), and `make chaos SEED=N MINUTES=M` one.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.chaos import checker, faults, run, workload
from tests.chaos.history import History
from tests.waiting import wait_for


def _seeds() -> list[int]:
    given = os.environ.get("BROOK_CHAOS_SEEDS", "1-2")
    first, _, last = given.partition("-")
    return list(range(int(first), int(last or first) + 1))


MINUTES = float(os.environ.get("BROOK_CHAOS_MINUTES", "0.5"))


@pytest.mark.parametrize("seed", _seeds())
def test_a_seeded_run_of_everything_under_faults_keeps_every_promise(
    seed: int, tmp_path: Path
) -> None:
    violations = run.run(seed, MINUTES * 60, tmp_path)
    assert not violations, run.report(seed, violations, tmp_path)


def test_the_same_seed_draws_the_same_faults() -> None:
    assert faults.schedule(7, 300) == faults.schedule(7, 300)
    assert faults.schedule(7, 300) != faults.schedule(8, 300)
    plan = faults.schedule(7, 300)
    assert plan and all(f.at_s < 240 for f in plan)  # the last fifth is quiet


def test_disk_faults_are_drawn_on_a_directory_and_take_overs_on_s3() -> None:
    local = {f.kind for seed in range(1, 30) for f in faults.schedule(seed, 300)}
    s3 = {f.kind for seed in range(1, 30) for f in faults.schedule(seed, 300, s3=True)}
    assert {"disk-full", "eio", "clock-step", "restart"} <= local
    assert not local & set(faults.S3_KINDS)
    assert {"take-over", "s3-trouble", "restart"} <= s3 and not s3 & set(faults.LOCAL_KINDS)


def test_a_client_sends_again_after_no_answer_a_5xx_or_a_fenced_broker() -> None:
    assert not workload.settled(None, None)
    assert not workload.settled(503, "storage_error")
    assert not workload.settled(409, "fenced")
    assert workload.settled(200, None) and workload.settled(409, "lease_expired")


def test_the_faulty_broker_fills_its_disk_and_fails_fsyncs_on_signals(tmp_path: Path) -> None:
    """The runner's disk faults reach the broker: SIGUSR1 fills the disk (and frees it
    again), SIGUSR2 fails the next fsyncs; nothing refused is stored, and it serves on."""
    store = run.Store("local", tmp_path, 1)
    process = run.BrokerProcess(tmp_path, run.free_port(), store)
    process.start()
    try:
        broker = workload.Broker(process.port, History(tmp_path / "h.jsonl", "test"), 1)

        answers: list[tuple[int | None, Any]] = []

        def append(value: str) -> int | None:
            answers.append(
                broker.call("POST", "/v1/topics/t/records", {"records": [{"value": value}]})
            )
            return answers[-1][0]

        assert append("before") == 200
        process.signal(signal.SIGUSR1)
        wait_for(lambda: append("full") == 503, what="a full disk")
        assert "ENOSPC" in answers[-1][1]["error"]["message"]
        process.signal(signal.SIGUSR1)
        wait_for(lambda: append("freed") == 200, what="the disk freed")
        process.signal(signal.SIGUSR2)
        wait_for(lambda: append("eio") == 503, what="a failed fsync")
        assert "EIO" in answers[-1][1]["error"]["message"]
        wait_for(lambda: append("after") == 200, what="fsyncs working again")
        status, body = broker.call("GET", "/v1/topics/t/records?partition=0&offset=0")
        assert status == 200, body
        values = [r["value"] for r in body["records"]]
        assert values[0] == "before" and values[-1] == "after"
        assert "full" not in values and "eio" not in values
    finally:
        process.stop()


def _append(t: float, value: str, offset: int, status: int | None = 200) -> dict[str, Any]:
    return {
        "t": t, "p": "driver", "kind": "append", "topic": "chaos.orders", "key": "k1",
        "value": value, "sent": t, "status": status, "code": None,
        "partition": 0, "offset": offset,
    }  # fmt: skip


def _final(values: list[str]) -> dict[str, Any]:
    records = [
        {"offset": i, "value": v, "key": "k1", "timestamp": 0, "headers": {}}
        for i, v in enumerate(values)
    ]
    acked = len(values)
    lake = [{f: r[f] for f in ("offset", "value", "key", "timestamp")} for r in records]
    return {
        "logs": {"chaos.orders": {"0": records}},
        "lake": {"chaos.orders": {"0": lake}},
        "queue": {"ready": 0, "leased": 0, "retrying": 0, "dead": 0, "acked": acked},
        "faults": [],
    }


def test_the_checker_finds_a_lost_acknowledged_record() -> None:
    events = [_append(1.0, "a", 0), _append(2.0, "b", 1)]
    assert checker.check(events, _final(["a", "b"])) == []
    lost = checker.check(events, _final(["a"]))
    assert [v.promise for v in lost] == ["no acknowledged record lost or changed"]
    assert "chaos.orders/0@1" in lost[0].detail and lost[0].excerpt == [events[1]]


def test_the_checker_finds_a_repeat_a_5xx_and_a_stall() -> None:
    events = [_append(1.0, "a", 0), _append(40.0, "b", 1, status=500)]
    found = {v.promise for v in checker.check(events, _final(["a", "a"]))}
    assert found == {
        "an idempotency key appends once",
        "no 5xx but the documented 503s",
        "progress: appends are acknowledged while nothing is faulted",
    }


def test_the_checker_finds_keys_leased_out_of_order() -> None:
    lease = {"p": "driver", "kind": "lease", "status": 200, "code": None}
    events = [
        {**lease, "t": 1.0, "jobs": [[0, 5, "k1", 1]]},
        {**lease, "t": 2.0, "jobs": [[0, 3, "k1", 1]]},
    ]
    final = {"logs": {}, "queue": {"acked": 0}, "faults": []}
    found = [v for v in checker.check(events, final) if "offset order" in v.promise]
    assert len(found) == 1 and "offset 5 first leased" in found[0].detail


def _run(t: float, kind: str, ref: str, ran: str, key: str | None = None, **more: Any) -> Any:
    return {"t": t, "p": "worker-7", "kind": kind, "ref": ref, "task": ran, "ran": ran,
            "attempt": 1, "key": key, **more}  # fmt: skip


def test_the_checker_finds_the_tasks_broken_promises() -> None:
    enqueue = {"t": 0.5, "p": "driver", "kind": "enqueue", "status": 200, "code": None}
    events = [
        {**enqueue, "task": "charge", "args": ["a"], "id": "e-1", "ref": "q/0/0", "key": "c1"},
        {**enqueue, "task": "charge", "args": ["b"], "id": "e-2", "ref": "q/0/1", "key": "c1"},
        {**enqueue, "task": "later", "args": [3, 5000], "id": "e-3", "ref": "q/0/2"},
        _run(1.0, "run-start", "q/0/0", "charge", "c1", args=["a"], wall_ms=1000),
        _run(1.1, "run-start", "q/0/1", "charge", "c1", args=["b"], wall_ms=1100),
        _run(1.2, "run-end", "q/0/0", "charge", "c1"),
        _run(1.3, "run-end", "q/0/1", "charge", "c1"),
        {**_run(1.4, "run-start", "q/0/2", "urgent", args=[3, 5000], wall_ms=4000)},
    ]
    slot = {"offset": 3, "value": "", "key": None, "timestamp": 0,
            "headers": {"brook.schedule": "tick", "brook.slot_ms": "1000"}}  # fmt: skip
    final = _final([])
    final["logs"]["chaos.tasks"] = {"0": [slot, {**slot, "offset": 4}]}
    final["lake"]["chaos.tasks"] = {"0": []}
    final["jobs"] = {ref: {"state": "acked", "attempts": 1} for ref in ("q/0/0", "q/0/1", "q/0/2")}
    found = {v.promise: v.detail for v in checker.check(events, final)}
    assert (
        "started 0.100 s before q/0/0 ended"
        in found["no key runs above its concurrency limit (1) at any instant"]
    )
    assert (
        "urgent(3, 5000) ran for q/0/2"
        in found["a job runs only the function it names, with its own arguments"]
    )
    assert found["a periodic job is enqueued once per slot"] == "slot 1000 has 2 jobs"
    assert "the lake has 0 rows, the log 2" in found["the lake equals the log, row for row"]
    assert "a delayed job never runs early" not in found  # urgent ran, not later
    events[-1] = _run(1.4, "run-start", "q/0/2", "later", args=[3, 5000], wall_ms=4000)
    found = {v.promise: v.detail for v in checker.check(events, final)}
    assert found["a delayed job never runs early"] == "q/0/2 started 1000 ms early"


def test_the_checker_finds_a_lost_commit_and_an_unread_record() -> None:
    base = {"p": "driver", "status": 200, "code": None}
    events = [
        {**base, "t": 1.0, "kind": "poll", "records": [[0, 0, "a"], [0, 1, "b"]]},
        {**base, "t": 1.1, "kind": "commit", "offsets": {"0": 2}},
        {**base, "t": 2.0, "kind": "poll", "records": [[0, 1, "b"]]},
    ]
    final = _final([])
    records = [{"offset": i, "value": v, "key": None, "timestamp": 0, "headers": {}}
               for i, v in enumerate("abc")]  # fmt: skip
    final["logs"]["chaos.events.a"] = {"0": records}
    found = {
        v.promise: v.detail
        for v in checker.check(events, final)
        if "position" in v.promise or "stream group" in v.promise
    }
    assert found == {
        "a committed position is never lost": (
            "partition 0: a poll began at 1 after a commit of 2 was acknowledged"
        ),
        "a stream group reads every record (at least once)": (
            "chaos.events.a/0: 1 never polled, first [2]"
        ),
    }


def test_the_checker_allows_a_clock_step_and_no_more() -> None:
    """A delayed job may start early by a step of the broker's clock that came while it
    waited; by more, or with no step, it is early."""
    enqueue = {"t": 10.0, "p": "driver", "kind": "enqueue", "status": 200, "code": None,
               "task": "later", "args": [3, 60_000], "id": "e-1", "ref": "q/0/0"}  # fmt: skip
    final = _final([])
    final["jobs"] = {"q/0/0": {"state": "acked", "attempts": 1}}

    def early_by(ms: int, steps: list[list[Any]]) -> set[str]:
        run = _run(30.0, "run-start", "q/0/0", "later", args=[3, 60_000], wall_ms=60_000 - ms)
        final["faults"] = steps
        return {v.detail for v in checker.delayed_jobs_never_run_early([enqueue, run], final)}

    step = [20.0, 25.0, "clock-step", None, 40.0]
    assert early_by(30_000, [step]) == set()
    assert early_by(50_000, [step]) == {"q/0/0 started 10000 ms early"}
    assert early_by(30_000, []) == {"q/0/0 started 30000 ms early"}
    assert early_by(30_000, [[40.0, 45.0, "clock-step", None, 40.0]]) == {
        "q/0/0 started 30000 ms early"  # the step came after the job started
    }
