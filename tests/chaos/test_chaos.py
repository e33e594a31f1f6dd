"""The whole system under faults (issue 51): seeded chaos runs checked by the history
checker, and the checker itself shown to catch what it looks for.

`make test` runs two short seeds; `make reliability` many long ones
(BROOK_CHAOS_SEEDS=1-50, BROOK_CHAOS_MINUTES=5), and `make chaos SEED=N MINUTES=M` one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.chaos import checker, faults, run


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
    return {
        "logs": {"chaos.orders": {"0": records}},
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
