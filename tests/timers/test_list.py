"""Listing pending timers a page at a time (`b.list_timers`): every pending timer once,
in order of due time then id, whatever the page size and wherever the timer is (held
for the look-ahead, in a bucket's files, or scheduled since the last flush), and none
that fired or was cancelled."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brook
from brook.errors import BadRequest
from tests.timers.test_service import Clock, wait_for

DAY_MS = 24 * 3600 * 1000


def every_page(b: brook.Broker, limit: int, **filters: object) -> list[tuple[int, str]]:
    seen: list[tuple[int, str]] = []
    after = None
    for _ in range(10_000):
        page = b.list_timers(after=after, limit=limit, **filters)  # type: ignore[arg-type]
        assert len(page.timers) <= limit
        seen += [(t.due_ms, t.timer_id) for t in page.timers]
        assert all(t.state == "pending" for t in page.timers)
        if page.next is None:
            return seen
        after = page.next
    raise AssertionError("the pages never ended")


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), limit=st.sampled_from([1, 7, 50, 1000]))
def test_pages_hold_every_pending_timer_once_in_order(
    tmp_path_factory: pytest.TempPathFactory, seed: int, limit: int
) -> None:
    rng = random.Random(seed)
    clock = Clock()
    folder = tmp_path_factory.mktemp("timers")
    with brook.open(str(folder), clock=clock) as b:
        t0 = clock.ms()
        specs = [
            brook.TimerSpec(
                rng.choice(["a", "b"]),
                b"x",
                at=t0 + rng.randrange(30_000, 3 * DAY_MS),  # near ones and far buckets
                timer_id=f"t{i:03d}",
            )
            for i in range(rng.randrange(1, 160))
        ]
        b.schedule_many(specs[: len(specs) // 2])
        b.timers.flush()  # half in bucket files, half scheduled since
        b.schedule_many(specs[len(specs) // 2 :])
        cancelled = {s.timer_id for s in specs if rng.random() < 0.2}
        for timer_id in cancelled:
            assert b.cancel_timer(str(timer_id))
        clock.now += 60  # the look-ahead holds the first ones; those due now fire
        b.timers.poke()
        due_now = {s.timer_id for s in specs if s.at is not None and s.at <= clock.ms()}
        wait_for(lambda: all(b.timer(str(i)).state != "pending" for i in due_now))  # type: ignore[union-attr]
        pending = sorted(
            (s.at, str(s.timer_id))
            for s in specs
            if s.timer_id not in cancelled and s.timer_id not in due_now and s.at is not None
        )
        assert every_page(b, limit) == pending
        of_a = {str(s.timer_id) for s in specs if s.topic == "a"}
        assert every_page(b, limit, topic="a") == [p for p in pending if p[1] in of_a]
        low, high = t0 + DAY_MS // 2, t0 + 2 * DAY_MS
        window = [p for p in pending if low <= p[0] < high]
        assert every_page(b, limit, due_from_ms=low, due_to_ms=high) == window


def test_a_restarted_broker_lists_what_it_had(tmp_path: Path) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        t0 = clock.ms()
        ids = b.schedule_many(
            [brook.TimerSpec("a", b"x", at=t0 + n * 3_600_000 + 5_000) for n in range(1, 40)]
        )
    with brook.open(str(tmp_path), clock=clock) as b:
        assert [t.timer_id for t in b.list_timers(limit=1000).timers] == ids


def test_bad_cursors_and_limits_are_400(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        for bad in ("", "x", "12", ":t", "-1:t"):
            with pytest.raises(BadRequest, match="cursor"):
                b.list_timers(after=bad)
        for limit in (0, 1001, True):
            with pytest.raises(BadRequest, match="limit"):
                b.list_timers(limit=limit)
