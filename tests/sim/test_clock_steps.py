"""A wall clock that steps forward and back under timers, leases and retention.

The broker's clock is injected (brook/clock.py): its wall time here is the real
time plus an offset the test changes, its monotonic time the real one, so the
broker's own threads run as they would while an operator or NTP sets the clock.

- Timers fire when the wall clock reaches their due time, never before (a fired
  record's timestamp is at or after its due time), each exactly once; a clock
  stepped back delays them, one stepped forward fires those it passes.
- Leases run on the wall clock: a step forward ends the leases it passes, each
  as one attempt (never several, never a dead record for one step), and their
  receipts then raise LeaseExpired; nothing is lost or handed out twice.
- Retention never deletes a record early: a wall clock stepped forward cannot
  make records old (ages are measured against the time that really passed).

BROOK_SEED replays the randomized test.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import brook
from brook.clock import Clock
from brook.errors import LeaseExpired
from brook.records import Record
from tests import waiting

HOUR_MS = 3_600_000


class SteppedWall:
    """The real time plus an offset that jumps when told to."""

    def __init__(self) -> None:
        self.offset_s = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset_s

    def ms(self) -> int:
        return int(self() * 1000)


@pytest.fixture
def stepped(tmp_path: Path) -> Iterator[tuple[brook.Broker, SteppedWall]]:
    wall = SteppedWall()
    with brook.open(str(tmp_path / "data"), clock=Clock(wall=wall)) as b:
        yield b, wall


def wait_for(condition: Callable[[], object], seconds: float = 15) -> None:
    waiting.wait_for(condition, seconds, every_s=0.02)


def fired(b: brook.Broker) -> dict[str, brook.Record]:
    if not b.core.has_topic("due"):
        return {}
    records = b.topic("due").read(0, 0, 100_000)
    by_id: dict[str, brook.Record] = {}
    for record in records:
        assert record.headers is not None
        timer_id = record.headers["brook.timer.id"].decode()
        assert timer_id not in by_id, f"{timer_id} fired twice"
        by_id[timer_id] = record
    return by_id


def test_a_clock_stepped_back_delays_timers_and_one_stepped_forward_fires_them(
    stepped: tuple[brook.Broker, SteppedWall],
) -> None:
    b, wall = stepped
    due = wall.ms() + 1_500
    b.schedule("due", b"soon", at=due, timer_id="soon")
    b.schedule("due", b"later", at=due + 2 * HOUR_MS, timer_id="later")
    wall.offset_s = -3600  # an hour back
    time.sleep(2.5)  # past the due time by the real clock, an hour before it by the wall
    assert fired(b) == {}, "a timer fired before its due time"
    assert b.timer("soon").state == "pending"  # type: ignore[union-attr]
    wall.offset_s = 3600  # an hour forward of the real time: "soon" is due, "later" not
    wait_for(lambda: "soon" in fired(b))
    record = fired(b)["soon"]
    assert record.timestamp >= due
    time.sleep(0.5)
    assert "later" not in fired(b)
    wall.offset_s = 3 * 3600
    wait_for(lambda: "later" in fired(b))
    assert fired(b)["later"].timestamp >= due + 2 * HOUR_MS


def test_random_steps_never_fire_a_timer_early_or_twice(
    stepped: tuple[brook.Broker, SteppedWall],
) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"clock steps seed {seed} (BROOK_SEED={seed} replays it)")
    rng = random.Random(seed)
    b, wall = stepped
    due: dict[str, int] = {}
    for step in range(12):
        for n in range(20):
            timer_id = f"s{step}-{n}"
            due[timer_id] = wall.ms() + rng.randrange(-1_000, 10 * 60_000)
            b.schedule("due", b"x", at=due[timer_id], timer_id=timer_id)
        wall.offset_s += rng.choice([-1, 1]) * rng.uniform(1, 300)
        time.sleep(rng.uniform(0, 0.3))
        for timer_id, record in fired(b).items():
            assert record.timestamp >= due[timer_id], f"{timer_id} early (seed {seed})"
    wall.offset_s = 3600
    wait_for(lambda: set(fired(b)) == set(due), 30)
    for timer_id, record in fired(b).items():
        assert record.timestamp >= due[timer_id], f"{timer_id} early (seed {seed})"
    print(f"{len(due)} timers through 12 random clock steps: each fired once, none early")


def test_a_step_forward_ends_each_lease_once(stepped: tuple[brook.Broker, SteppedWall]) -> None:
    b, wall = stepped
    b.topic("jobs").append_many([Record(b"%d" % i) for i in range(20)])
    q = b.queue("jobs", "workers", visibility_timeout_ms=60_000, max_attempts=2)
    first = q.lease(max_records=20, timeout=1)
    assert len(first) == 20 and {j.attempt for j in first} == {1}
    wall.offset_s = -3600  # back: the leases stand, nothing comes back
    assert q.lease(max_records=20, timeout=0.3) == []
    q.ack(first[:5])
    wall.offset_s = 10 * 3600  # ten hours forward: every live lease has ended, once
    second = q.lease(max_records=20, timeout=2)
    assert sorted(j.record.offset for j in second) == list(range(5, 20))
    assert {j.attempt for j in second} == {2}, "one step ends one attempt"
    with pytest.raises(LeaseExpired):
        q.ack(first[5:6])
    stats = q.stats()
    assert (stats["acked"], stats["leased"], stats["dead"]) == (5, 15, 0)
    q.ack(second)
    assert q.stats()["acked"] == 20


def test_a_step_forward_deletes_no_record_early(tmp_path: Path) -> None:
    moments = {"wall": 1_800_000_000.0, "monotonic": 1_000.0}
    clock = Clock(wall=lambda: moments["wall"], monotonic=lambda: moments["monotonic"])
    with brook.open(str(tmp_path / "data"), clock=clock, segment_bytes_max=300) as b:
        b.create_topic("kept", retention_ms=60_000)
        b.topic("kept").append_many([Record(b"." * 100) for _ in range(30)])
        moments["wall"] += 86_400  # a day forward, and no time has passed
        b.topic("kept").append_many([Record(b"+" * 100) for _ in range(30)])
        b.core.run_maintenance()
        assert b.topic("kept").start_offsets() == {0: 0}, "deleted by a clock step"
        moments["wall"] -= 2 * 86_400  # and back, two days
        b.core.run_maintenance()
        assert b.topic("kept").start_offsets() == {0: 0}
        moments["wall"] += 86_400 + 61
        moments["monotonic"] += 61  # a minute really passes: the first records are old
        b.core.run_maintenance()
        start = b.topic("kept").start_offsets()[0]
        assert 0 < start <= 30, "the records older than their retention go, no others"
        assert b.topic("kept").end_offsets() == {0: 60}
