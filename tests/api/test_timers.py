"""Timers (SPEC §1, §3): embedded (disk, memory, S3) and remote (HTTP, the Python
client) pass the same tests, on the real clock with short delays."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import brook
from brook.errors import BadRequest, Conflict, InvalidName
from tests import waiting


def wait_for(condition: Callable[[], object], timeout: float = 10.0) -> None:
    waiting.wait_for(condition, timeout, every_s=0.01)


def values(b: Any, topic: str = "reminders") -> list[bytes]:
    if topic not in {info.name for info in b.topics()}:
        return []
    return [r.value for r in b.topic(topic).read(0, 0, 1_000)]


def test_a_timer_fires_into_its_topic_and_says_where(broker: Any) -> None:
    timer_id = broker.schedule(
        "reminders", b"ping", delay_ms=100, key=b"k", headers={"h": b"1"}, timer_id="t-1"
    )
    assert timer_id == "t-1"
    info = broker.timer("t-1")
    assert info is not None and info.state == "pending" and info.topic == "reminders"
    wait_for(lambda: values(broker) == [b"ping"])
    (record,) = broker.topic("reminders").read(0, 0, 10)
    assert record.key == b"k"
    assert record.headers == {"h": b"1", "brook.timer.id": b"t-1"}
    wait_for(lambda: broker.timer("t-1").state == "fired")
    info = broker.timer("t-1")
    assert (info.partition, info.offset) == (0, 0)
    assert info.at_ms >= info.due_ms
    assert not broker.cancel_timer("t-1"), "a fired timer cannot be cancelled"


def test_timers_fire_in_due_order_and_cancelled_ones_never(broker: Any) -> None:
    now = int(time.time() * 1000)
    ids = broker.schedule_many(
        [
            brook.TimerSpec("reminders", b"c", at=now + 600),
            brook.TimerSpec("reminders", b"a", at=now + 200),
            brook.TimerSpec("reminders", b"cancelled", at=now + 300),
            brook.TimerSpec("reminders", b"b", at=now + 400),
        ]
    )
    assert len(set(ids)) == 4
    assert broker.cancel_timer(ids[2])
    assert not broker.cancel_timer(ids[2])
    wait_for(lambda: len(values(broker)) >= 3)
    assert values(broker) == [b"a", b"b", b"c"]
    assert broker.timer(ids[2]).state == "cancelled"


def test_the_first_timer_with_an_id_stands(broker: Any) -> None:
    assert broker.schedule("reminders", b"first", delay_ms=200, timer_id="dup") == "dup"
    assert broker.schedule("reminders", b"first", delay_ms=10, timer_id="dup") == "dup"
    with pytest.raises(Conflict, match="another value"):
        broker.schedule("reminders", b"second", delay_ms=10, timer_id="dup")
    broker.schedule("reminders", b"sentinel", delay_ms=400)
    wait_for(lambda: len(values(broker)) == 2)
    assert values(broker) == [b"first", b"sentinel"]


def test_unknown_timers(broker: Any) -> None:
    assert broker.timer("nobody") is None
    assert broker.cancel_timer("nobody") is False


def test_bad_timers_are_refused(broker: Any) -> None:
    with pytest.raises(BadRequest):
        broker.schedule("reminders", b"v", at=1, delay_ms=1)
    with pytest.raises(BadRequest):
        broker.schedule("reminders", b"v", timer_id="has space")
    with pytest.raises(InvalidName):
        broker.schedule("bad/topic", b"v")
    with pytest.raises(BadRequest):
        broker.timer("has space")


def test_pending_timers_are_listed_a_page_at_a_time_on_every_surface(broker: Any) -> None:
    now = int(time.time() * 1000)
    hour = 3_600_000
    ids = broker.schedule_many(
        [
            brook.TimerSpec("reminders" if n % 3 else "other", b"x", at=now + n * hour + 60_000)
            for n in range(1, 12)
        ]
    )
    assert broker.cancel_timer(ids[4])
    pending = [i for i in ids if i != ids[4]]
    seen, after = [], None
    while True:
        page = broker.list_timers(after=after, limit=4)
        assert len(page.timers) <= 4
        seen += page.timers
        if page.next is None:
            break
        after = page.next
    assert [t.timer_id for t in seen] == pending
    assert all(t.state == "pending" and t.due_ms > now for t in seen)
    others = broker.list_timers(topic="other", limit=1000).timers
    assert [t.timer_id for t in others] == [i for n, i in enumerate(ids, 1) if n % 3 == 0]
    window = broker.list_timers(due_from_ms=now + 3 * hour, due_to_ms=now + 5 * hour).timers
    assert [t.timer_id for t in window] == ids[2:4]
    with pytest.raises(BadRequest):
        broker.list_timers(after="not-a-cursor")
    with pytest.raises(BadRequest):
        broker.list_timers(limit=0)
