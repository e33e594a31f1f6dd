"""The worker's ledger (brook/tasks/ledger.py), case by case; the seeded simulation
(tests/sim/test_worker_sim.py) drives it at random."""

from __future__ import annotations

import random

from brook import limits
from brook.tasks.ledger import Leased, Ledger, Outcome, Stage


def _job(n: int, task: str | None = "a", key: bytes | None = None) -> Leased:
    return Leased(f"r{n}", "q", task, key, 3_000, "" if task else "not JSON", (0, n))


def _ledger(**changes: object) -> Ledger:
    settings: dict[str, object] = {
        "slots": 2,
        "runs": ["a"],
        "declared": ["a", "b"],
        "timeouts_ms": {"a": 1_000, "b": None},
        "feeders": 1,
    }
    settings.update(changes)
    return Ledger(**settings)  # type: ignore[arg-type]


def test_a_job_runs_only_where_its_task_runs() -> None:
    ledger = _ledger()
    asked = ledger.reserve(4)
    settles = ledger.leased([_job(1), _job(2, "b"), _job(3, "zzz"), _job(4, None)], asked, False, 0)
    assert [(s.receipt, s.outcome.action) for s in settles] == [
        ("r2", "release"),
        ("r3", "discard"),
        ("r4", "discard"),
    ]
    delay = settles[0].outcome.delay_ms
    assert delay is not None
    assert limits.worker_release_ms_min * 0.5 <= delay <= limits.worker_release_ms_min * 1.5
    assert "no task named zzz" in settles[1].outcome.reason
    assert settles[2].outcome.reason == "not JSON"
    assert [h.leased.receipt for h in ledger.startable(0)] == ["r1"]
    ledger.check()


def test_the_release_pause_doubles_for_a_job_met_again_jittered() -> None:
    ledger = _ledger(rng=random.Random(7))
    delays = []
    for n in range(3):
        asked = ledger.reserve(1)
        job = Leased(f"x{n}", "q", "b", None, 3_000, "", (0, 7))
        (settle,) = ledger.leased([job], asked, False, 0)
        delays.append(settle.outcome.delay_ms)
        ledger.settled([settle.receipt])
    bases = [limits.worker_release_ms_min * 2**n for n in range(3)]
    assert all(b * 0.5 <= d <= b * 1.5 for b, d in zip(bases, delays, strict=True)), delays
    assert len(set(delays)) == 3


def test_a_thread_past_its_deadline_keeps_its_slot_and_lease_until_it_returns() -> None:
    ledger = _ledger(slots=1)
    asked = ledger.reserve(2)
    ledger.leased([_job(1, key=b"k"), _job(2, key=b"k")], asked, False, 0)
    ledger.startable(0)
    assert ledger.begin("r1", 10) == 1_010
    assert ledger.next_deadline_ms() == 1_010
    assert ledger.overdue(1_009) == []
    (late,) = ledger.overdue(1_010)
    assert late.stage is Stage.OVERDUE and late.outcome is not None
    assert late.outcome.reason.startswith("TimeoutError")
    assert ledger.startable(1_010) == []  # its slot is still taken
    assert "r1" in ledger.due_extensions(2_000)["q"]  # and its lease kept
    settle = ledger.returned("r1", 5_000, Outcome("ack"))
    assert settle.outcome.action == "nack" and settle.ran_ms == 4_990  # the result dropped
    assert [h.leased.receipt for h in ledger.startable(5_000)] == ["r2"]
    ledger.settled(["r1"])
    ledger.check()


def test_room_is_given_back_once_a_job_finished_and_its_lease_kept_until_settled() -> None:
    ledger = _ledger(slots=1, held_per_slot=2)
    assert ledger.reserve(5) == 2
    assert ledger.reserve(1) == 0
    ledger.leased([_job(1)], 2, False, 0)
    assert ledger.room == 1
    ledger.startable(0)
    ledger.returned("r1", 1, Outcome("ack"))
    assert ledger.room == 2
    assert "r1" in ledger.held and ledger.due_extensions(1_000) == {"q": ["r1"]}
    ledger.settled(["r1"])
    assert ledger.room == 2 and not ledger.held
    ledger.check()


def test_an_idle_feeder_brings_one_job_on_room_of_its_own() -> None:
    ledger = _ledger(slots=1, held_per_slot=1, feeders=1)
    assert ledger.reserve(1) == 1  # all the room, reserved by a busy feeder
    assert ledger.reserve(1, idle=True) == 1
    assert ledger.reserve(1, idle=True) == 0  # one per feeder
    ledger.leased([_job(1)], 1, True, 0)
    ledger.leased([], 1, False, 0)
    assert ledger.reserve(1, idle=True) == 0
    assert ledger.room == 1 and ledger.idle_held == 1
    ledger.check()


def test_leases_are_extended_once_two_thirds_of_the_visibility_are_left() -> None:
    ledger = _ledger()
    ledger.leased([_job(1)], ledger.reserve(1), False, 0)
    assert ledger.next_extension_ms() == 1_000
    assert ledger.due_extensions(999) == {}
    assert ledger.due_extensions(1_000) == {"q": ["r1"]}
    ledger.extended(["r1"], 4_000)
    assert ledger.next_extension_ms() == 2_000
