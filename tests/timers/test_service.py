"""Timers on an embedded broker with an injected clock: due order, never early,
exactly once across restarts, cancels, duplicates, buckets on storage."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import brook
from brook import limits
from brook.errors import BadRequest, Conflict, InvalidName
from tests import waiting
from tests.s3server import MotoServer

HOUR_S = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def ms(self) -> int:
        return int(self.now * 1000)


def wait_for(condition: Callable[[], object], timeout: float = 10.0) -> None:
    waiting.wait_for(condition, timeout, every_s=0.005)


def values(b: brook.Broker, topic: str = "reminders") -> list[bytes]:
    if not b.core.has_topic(topic):
        return []
    return [r.value for r in b.topic(topic).read(0, 0, 10_000)]


def move(b: brook.Broker, clock: Clock, seconds: float) -> None:
    clock.now += seconds
    b.timers.poke()


def test_timers_fire_in_due_order_and_never_early(tmp_path: Path) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        t0 = clock.ms()
        b.schedule("reminders", b"third", at=t0 + 3_000)
        b.schedule("reminders", b"first", at=t0 + 1_000)
        b.schedule("reminders", b"second", delay_ms=2_000)
        move(b, clock, 0.999)
        time.sleep(0.05)
        assert values(b) == []
        move(b, clock, 0.001)
        wait_for(lambda: values(b) == [b"first"])
        move(b, clock, 5)
        wait_for(lambda: len(values(b)) == 3)
        records = b.topic("reminders").read(0, 0, 10)
        assert [r.value for r in records] == [b"first", b"second", b"third"]
        assert all(r.headers and "brook.timer.id" in r.headers for r in records)
        for r in records:
            assert r.headers is not None
            info = b.timer(r.headers["brook.timer.id"].decode())
            assert info is not None and (info.state, info.offset) == ("fired", r.offset)
            assert info.at_ms is not None and info.at_ms >= info.due_ms


def test_each_timer_fires_once_across_restarts(tmp_path: Path) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        timer_id = b.schedule("reminders", b"once", delay_ms=10, timer_id="order-7")
        move(b, clock, 1)
        wait_for(lambda: values(b) == [b"once"])
    for _ in range(2):
        with brook.open(str(tmp_path), clock=clock) as b:
            move(b, clock, 1)
            b.timers.flush()
            info = b.timer(timer_id)
            assert info is not None and info.state == "fired" and info.offset == 0
            assert b.schedule("reminders", b"again", timer_id="order-7") == "order-7"
    with brook.open(str(tmp_path), clock=clock) as b:
        time.sleep(0.05)
        assert values(b) == [b"once"]


def test_cancelled_timers_never_fire(tmp_path: Path) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        doomed = b.schedule("reminders", b"doomed", delay_ms=1_000)
        far = b.schedule("reminders", b"far and doomed", delay_ms=int(5 * HOUR_S * 1000))
        assert b.cancel_timer(doomed) and b.cancel_timer(far)
        assert not b.cancel_timer(doomed)
        assert not b.cancel_timer("never-scheduled")
        b.schedule("reminders", b"sentinel", delay_ms=2_000)
        b.schedule("reminders", b"late sentinel", delay_ms=int(6 * HOUR_S * 1000))
        b.timers.flush()
    with brook.open(str(tmp_path), clock=clock) as b:
        info = b.timer(doomed)
        assert info is not None and info.state == "cancelled"
        move(b, clock, 7 * HOUR_S)
        wait_for(lambda: values(b) == [b"sentinel", b"late sentinel"])


def test_scheduling_an_id_again_keeps_the_first(tmp_path: Path) -> None:
    """A retry of the same schedule (same topic and record, any due time) keeps the
    first; the same id for another record or topic is a Conflict, and a batch holding
    one schedules nothing."""
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        assert b.schedule("reminders", b"first", delay_ms=1_000, timer_id="x") == "x"
        assert b.schedule("reminders", b"first", delay_ms=10, timer_id="x") == "x"
        with pytest.raises(Conflict, match="another value"):
            b.schedule("reminders", b"second", delay_ms=10, timer_id="x")
        with pytest.raises(Conflict, match="for topic reminders, not other"):
            b.schedule("other", b"first", delay_ms=10, timer_id="x")
        with pytest.raises(Conflict, match="another value"):
            b.schedule_many(
                [
                    brook.TimerSpec("reminders", b"new", delay_ms=10, timer_id="z"),
                    brook.TimerSpec("reminders", b"third", delay_ms=10, timer_id="x"),
                ]
            )
        assert b.timer("z") is None
        with pytest.raises(Conflict, match="given twice"):
            b.schedule_many(
                [
                    brook.TimerSpec("reminders", b"a", delay_ms=10, timer_id="w"),
                    brook.TimerSpec("reminders", b"b", delay_ms=10, timer_id="w"),
                ]
            )
        ids = b.schedule_many(
            [
                brook.TimerSpec("reminders", b"first", delay_ms=10, timer_id="x"),
                brook.TimerSpec("reminders", b"other", delay_ms=2_000, timer_id="y"),
            ]
        )
        assert ids == ["x", "y"]
        move(b, clock, 5)
        wait_for(lambda: len(values(b)) == 2)
        assert values(b) == [b"first", b"other"]
        # A timer is marked fired just after its record is appended.
        fired = lambda t: (info := b.timer(t)) is not None and info.state == "fired"  # noqa: E731
        wait_for(lambda: fired("x") and fired("y"))
        # Fired: the topic is still checked (the record is no longer held).
        with pytest.raises(Conflict, match="exists already for topic reminders"):
            b.schedule("other", b"first", timer_id="x")
    with brook.open(str(tmp_path), clock=clock) as b:  # checks hold after a restart
        b.schedule("reminders", b"later", delay_ms=60_000, timer_id="v")
    with (
        brook.open(str(tmp_path), clock=clock) as b,
        pytest.raises(Conflict, match="another value"),
    ):
        b.schedule("reminders", b"changed", delay_ms=60_000, timer_id="v")


def test_an_at_far_in_the_past_is_refused_as_seconds_given_as_ms(tmp_path: Path) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        seconds = clock.ms() // 1000
        with pytest.raises(BadRequest, match=f"give at={seconds * 1000}"):
            b.schedule("reminders", b"v", at=seconds)
        with pytest.raises(BadRequest, match="more than 24 hours ago"):
            b.schedule_many([brook.TimerSpec("reminders", b"v", at=5)])
        # Within the tolerance: due now, it fires.
        b.schedule("reminders", b"late", at=clock.ms() - 60_000, timer_id="late")
        move(b, clock, 1)
        wait_for(lambda: values(b) == [b"late"])


def test_timers_due_while_the_broker_was_down_fire_on_start_in_due_order(tmp_path: Path) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        t0 = clock.ms()
        specs = [
            brook.TimerSpec("reminders", f"{i}".encode(), at=t0 + (i * 7_919) % 50_000 + 1_000)
            for i in range(200)
        ]
        b.schedule_many(specs)
        b.schedule("reminders", b"much later", at=t0 + int(30 * 24 * HOUR_S * 1000))
    clock.now += 100
    with brook.open(str(tmp_path), clock=clock) as b:
        wait_for(lambda: len(values(b)) == 200)
        dues = [next(s.at for s in specs if s.value == v) for v in values(b)]
        assert dues == sorted(dues)
        # A timer counts as pending until its fired record is durable and noted as fired.
        wait_for(lambda: b.timers.pending() == 1)


def test_far_timers_live_in_buckets_not_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    with brook.open(str(tmp_path), clock=clock) as b:
        ids = b.schedule_many(
            [
                brook.TimerSpec("reminders", f"{h}".encode(), delay_ms=int(h * HOUR_S * 1000))
                for h in (3, 30, 300)
            ]
        )
        b.timers.flush()
        assert not (set(ids) & set(b.timers.book.near)), "far timers are not held in memory"
        buckets = {n.split("/")[2] for n in b.storage.list("timers/buckets/")}
        assert len(buckets) == 3
    with brook.open(str(tmp_path), clock=clock) as b:
        assert not (set(ids) & set(b.timers.book.near))
        for hours, expected in ((3.5, [b"3"]), (30, [b"3", b"30"]), (300, [b"3", b"30", b"300"])):
            clock.now = 1_800_000_000.0 + hours * HOUR_S
            b.timers.poke()
            wait_for(lambda expected=expected: values(b) == expected)  # type: ignore[misc]
        clock.now += 2 * HOUR_S + limits.timer_history_ms / 1000  # and their history is old
        b.timers.flush()
        assert b.storage.list("timers/buckets/") == [], "past buckets with nothing pending go"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"at": 1, "delay_ms": 1}, BadRequest),
        ({"delay_ms": -1}, BadRequest),
        ({"at": "soon"}, BadRequest),
        ({"timer_id": "no spaces"}, BadRequest),
        ({"timer_id": ""}, BadRequest),
        ({"key": "text"}, BadRequest),
    ],
)
def test_bad_timers_are_refused(tmp_path: Path, kwargs: dict[str, object], error: type) -> None:
    with brook.open(str(tmp_path)) as b:
        with pytest.raises(error):
            b.schedule("reminders", b"v", **kwargs)  # type: ignore[arg-type]
        with pytest.raises(InvalidName):
            b.schedule("__internal", b"v")
        with pytest.raises(BadRequest):
            b.schedule("reminders", "not bytes")  # type: ignore[arg-type]
        assert b.timer("unknown") is None


def test_a_batch_over_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "schedule_timers_max", 2)
    with brook.open(str(tmp_path)) as b, pytest.raises(BadRequest):
        b.schedule_many([brook.TimerSpec("t", b"v")] * 3)


def test_a_buckets_runs_are_merged_and_say_the_same(tmp_path: Path) -> None:
    clock = Clock()
    far = int(5 * HOUR_S * 1000)
    kept, cancelled = [], []
    with brook.open(str(tmp_path), clock=clock) as b:
        for _ in range(20):
            ids = b.schedule_many(
                [brook.TimerSpec("reminders", b"v", delay_ms=far + i) for i in range(10)]
            )
            assert b.cancel_timer(ids[0])
            cancelled.append(ids[0])
            kept.extend(ids[1:])
            b.timers.flush()
        runs = b.storage.list("timers/buckets/")
        assert 1 <= len(runs) < 8, runs
    with brook.open(str(tmp_path), clock=clock) as b:
        assert b.timers.pending() == len(kept)
        assert all(b.timer(t).state == "cancelled" for t in cancelled)  # type: ignore[union-attr]
        move(b, clock, 6 * HOUR_S)
        wait_for(lambda: len(values(b)) == len(kept))


def test_a_fresh_machine_has_every_timer_from_the_bucket(moto: MotoServer, tmp_path: Path) -> None:
    clock = Clock()
    url = moto.fresh_url()
    first = brook.open(
        url, endpoint_url=moto.endpoint, cache_dir=str(tmp_path / "dead-disk"), clock=clock
    )
    try:
        soon = first.schedule("reminders", b"soon", delay_ms=60_000)
        far = first.schedule("reminders", b"far", delay_ms=int(48 * HOUR_S * 1000))
        gone = first.schedule("reminders", b"cancelled", delay_ms=120_000)
        assert first.cancel_timer(gone)
        first.timers.flush()
        late = first.schedule("reminders", b"after the flush", delay_ms=90_000)
        # The machine dies here: no close. A new one with an empty disk takes over.
        with brook.open(
            url,
            endpoint_url=moto.endpoint,
            cache_dir=str(tmp_path / "new-disk"),
            clock=clock,
            take_over=True,
        ) as second:
            assert second.timer(gone).state == "cancelled"  # type: ignore[union-attr]
            assert second.timers.pending() == 3
            move(second, clock, 49 * HOUR_S)
            wait_for(lambda: values(second) == [b"soon", b"after the flush", b"far"])
            assert second.timer(far).state == "fired"  # type: ignore[union-attr]
            assert soon in second.timers.book.history and late in second.timers.book.history
    finally:
        with contextlib.suppress(brook.errors.BrookError):
            first.close()
