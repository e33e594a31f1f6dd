"""Slots a periodic schedule's broker was down over: skipped or run once, as the
schedule says, and never more than once (the wall clock is injected: hours pass
between two opens of one directory in no time)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import brook
from brook import limits
from brook.schedules.model import Spec, next_slot
from tests.waiting import slow


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _wait_for(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + slow(timeout)
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


@pytest.mark.parametrize(("missed", "late_runs"), [("skip", 0), ("run_once", 1)])
def test_slots_missed_while_down_are_skipped_or_run_once(
    tmp_path: Path, missed: str, late_runs: int
) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        info = b.put_schedule("hourly", "beats", b"x", every_ms=3_600_000, missed=missed)
        assert info.next_ms == 1_800_000_000_000 // 3_600_000 * 3_600_000 + 3_600_000
    clock.now += 5 * 3600  # down over five slots
    with brook.open(str(tmp_path), clock=clock) as b:
        if late_runs:
            _wait_for(lambda: b.get_schedule("hourly").fired == 1)
        time.sleep(limits.schedule_check_ms / 1000 * 3)
        after = b.get_schedule("hourly")
        appended = b.topic("beats").end_offsets()[0] if late_runs else 0
        assert appended == late_runs and ("beats" in {t.name for t in b.topics()}) == bool(
            late_runs
        )
        assert (after.fired, after.skipped) == (late_runs, 1 - late_runs)
        assert after.next_ms is not None and after.next_ms > clock.now * 1000


@settings(max_examples=200, deadline=None)
@example("30 2 * * *", "America/New_York", 1_741_419_000_000)  # the night 02:30 is skipped
@given(
    st.sampled_from(["*/5 * * * *", "0 9 * * 1-5", "30 2 * * *", "0 0 1 * *"]),
    st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]),
    st.integers(1_700_000_000_000, 1_900_000_000_000),
)
def test_cron_slots_move_forward_and_match_the_expression_in_its_zone(
    cron: str, tz: str, after: int
) -> None:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    spec = Spec(name="s", topic="t", cron=cron, tz=tz)
    first = next_slot(spec, after)
    second = next_slot(spec, first)
    assert after < first < second
    local = datetime.fromtimestamp(first / 1000, ZoneInfo(tz))
    minute, hour = cron.split()[:2]
    if hour == "2" and local.hour == 3:
        # 02:30 does not exist on a spring-forward night: that day's slot is the first
        # moment after the gap, once.
        assert local.minute == 0
        assert (
            local.utcoffset()
            != datetime.fromtimestamp(first / 1000 - 7200, ZoneInfo(tz)).utcoffset()
        )
    else:
        if minute.isdigit():
            assert local.minute == int(minute)
        if hour.isdigit():
            assert local.hour == int(hour)


def test_a_changed_definition_fires_its_next_slot_and_survives_a_restart(tmp_path: Path) -> None:
    """Its topic (or value) changed between two slots: the slot armed for the old one is
    fired for the new one (a timer id is taken once: the old, cancelled timer of that
    slot could not be armed again), and every change is kept over a restart."""
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        first = b.put_schedule("tick", "ccc", b"x", every_ms=20_000)
        moved = b.put_schedule("tick", "ddd", b"x", every_ms=20_000)
        again = b.put_schedule("tick", "eee", b"y", every_ms=20_000)
        assert first.next_ms == moved.next_ms == again.next_ms
        assert b.get_schedule("tick").topic == "eee"
    with brook.open(str(tmp_path), clock=clock) as b:
        assert b.get_schedule("tick").topic == "eee"
        assert again.next_ms is not None
        clock.now = again.next_ms / 1000 + 0.5
        _wait_for(lambda: b.get_schedule("tick").fired == 1)
        assert [r.value for r in b.topic("eee").read(0, 0)] == [b"y"]
        assert {t.name for t in b.topics()} == {"eee"}, "nothing fired for the old topics"
