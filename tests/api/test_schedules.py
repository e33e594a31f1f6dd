"""Periodic schedules (SPEC §9): embedded (disk, memory, S3) and remote pass the same tests."""

from __future__ import annotations

import time
from typing import Any

import pytest

from brook.errors import BadRequest, ScheduleNotFound
from tests.waiting import slow


def _wait(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + slow(timeout)
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


# Firing is the broker's own (timers), the same over every storage: one embedded and the
# remote surface are enough here (tests/schedules has the rest).
@pytest.mark.parametrize("broker", ["local", "remote"], indirect=True)
def test_a_schedule_fires_once_per_slot_and_can_be_paused_resumed_and_deleted(
    broker: Any,
) -> None:
    info = broker.put_schedule("tick", "ticks", b"beat", every_ms=1_000, key=b"k")
    assert (info.every_ms, info.paused, info.fired) == (1_000, False, 0)
    assert info.next_ms is not None and info.next_ms % 1_000 == 0
    _wait(lambda: broker.get_schedule("tick").fired >= 1)
    fired = broker.get_schedule("tick")
    records = broker.topic("ticks").read(0, 0, 100)
    slots = [int(r.headers["brook.slot_ms"]) for r in records]
    assert len(slots) == len(set(slots)), "a slot appended twice"
    assert all(s % 1_000 == 0 for s in slots)
    assert {r.value for r in records} == {b"beat"} and {r.key for r in records} == {b"k"}
    assert fired.last_slot_ms in slots and fired.last_offset is not None
    paused = broker.pause_schedule("tick")
    assert paused.paused and paused.next_ms is None
    count = broker.topic("ticks").end_offsets()[0]
    time.sleep(1.1)
    assert broker.topic("ticks").end_offsets()[0] == count, "a paused schedule fired"
    resumed = broker.resume_schedule("tick")
    assert not resumed.paused and resumed.next_ms is not None
    assert [s.name for s in broker.list_schedules()] == ["tick"]
    assert broker.delete_schedule("tick") is True
    assert broker.delete_schedule("tick") is False
    with pytest.raises(ScheduleNotFound):
        broker.get_schedule("tick")


def test_cron_schedules_in_a_time_zone_and_bad_definitions(broker: Any) -> None:
    info = broker.put_schedule("morning", "digests", cron="0 9 * * *", tz="Europe/Berlin")
    assert info.next_ms is not None
    assert time.gmtime(info.next_ms / 1000).tm_hour in (7, 8), "nine in Berlin is 7 or 8 UTC"
    for bad, message in (
        ({"cron": "* *"}, "not a cron expression"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "not a time zone"),
        ({}, "cron or every_ms"),
        ({"every_ms": 1_000, "missed": "sometimes"}, "missed"),
    ):
        with pytest.raises(BadRequest, match=message):
            broker.put_schedule("bad", "digests", **bad)
    assert [s.name for s in broker.list_schedules()] == ["morning"]
