"""TimerBook, the pure core of timers: schedule, cancel, due order, buckets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.timers.book import TimerBook, bucket_of
from brook.timers.model import Timer

HOUR = 3_600_000
NOW = 1_800_000_000_000


def book() -> TimerBook:
    b = TimerBook(HOUR, 60_000, HOUR, 1_000, NOW)
    b.loaded_until_ms = bucket_of(NOW, HOUR) + HOUR
    return b


def timer(timer_id: str, due: int) -> Timer:
    return Timer(timer_id, "t", due, b"v")


def test_the_first_of_two_timers_with_one_id_stands() -> None:
    b = book()
    assert [t.id for t in b.schedule([timer("a", NOW + 5), timer("a", NOW + 9)])] == ["a"]
    assert b.schedule([timer("a", NOW + 1)]) == []
    assert b.info("a") is not None and b.info("a").due_ms == NOW + 5  # type: ignore[union-attr]


def test_due_timers_come_out_in_due_order_and_never_early() -> None:
    b = book()
    b.schedule([timer("c", NOW + 30), timer("a", NOW + 10), timer("b", NOW + 20)])
    assert b.due(NOW + 9, 10) == []
    assert [t.id for t in b.due(NOW + 25, 10)] == ["a", "b"]
    assert b.next_due_ms() == NOW + 30


def test_cancelled_and_fired_timers_end_once() -> None:
    b = book()
    b.schedule([timer("a", NOW + 10), timer("b", NOW + 10)])
    cancelled = b.cancel("a", NOW)
    assert cancelled is not None and cancelled.state == "cancelled"
    assert b.cancel("a", NOW) is None and b.cancel("zzz", NOW) is None
    (due,) = b.due(NOW + 10, 10)
    assert due.id == "b"
    info = b.fired(due, 0, 7, NOW + 11)
    assert (info.state, info.partition, info.offset) == ("fired", 0, 7)
    assert b.cancel("b", NOW + 12) is None
    assert b.schedule([timer("b", NOW + 99)]) == [], "a fired id is remembered"


def test_far_timers_wait_for_their_bucket_and_are_held_once_loaded() -> None:
    b = book()
    far = timer("far", NOW + 5 * HOUR)
    b.schedule([far])
    assert "far" not in b.near and "far" in b.pending
    flushed = b.take_unflushed()
    assert [t.id for part in flushed.values() for t in part.timers] == ["far"]
    start = bucket_of(far.due_ms, HOUR)
    assert b.buckets_to_load(start - 60_000) == [
        bucket_of(NOW, HOUR) + HOUR * i for i in range(1, 6)
    ]
    for s in b.buckets_to_load(start - 60_000):
        b.load(s, [far] if s == start else [])
    assert [t.id for t in b.due(far.due_ms, 10)] == ["far"]


def test_a_far_timer_cancelled_before_its_bucket_loads_never_comes_back() -> None:
    b = book()
    far = timer("far", NOW + 5 * HOUR)
    b.schedule([far])
    b.take_unflushed()
    assert b.cancel("far", NOW) is not None
    b.load(bucket_of(far.due_ms, HOUR), [far])
    assert b.due(far.due_ms, 10) == []


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.integers(-HOUR, 4 * HOUR), st.booleans()),
        max_size=60,
    )
)
def test_every_timer_comes_due_once_in_order_unless_cancelled(
    plan: list[tuple[int, int, bool]],
) -> None:
    b = book()
    wanted: dict[str, int] = {}
    cancelled: set[str] = set()
    for n, delay, cancel in plan:
        timer_id = f"t{n}"
        if b.schedule([timer(timer_id, NOW + delay)]):
            wanted[timer_id] = NOW + delay
        if cancel and b.cancel(timer_id, NOW) is not None:
            cancelled.add(timer_id)
    fired: list[Timer] = []
    clock = NOW
    while clock <= NOW + 5 * HOUR:
        for start in b.buckets_to_load(clock):
            b.load(start, [])  # nothing was flushed: the book still holds every timer
        for t in b.due(clock, 1_000):
            assert t.due_ms <= clock
            b.fired(t, 0, len(fired), clock)
            fired.append(t)
        clock += 600_000
    assert sorted(t.id for t in fired) == sorted(set(wanted) - cancelled)
    assert [t.due_ms for t in fired] == sorted(t.due_ms for t in fired)


def test_a_timer_being_fired_can_no_longer_be_cancelled() -> None:
    b = book()
    b.schedule([timer("a", NOW)])
    (due,) = b.due(NOW, 10)
    assert b.cancel("a", NOW) is None, "its record may already be in the topic"
    b.put_back([due])
    assert b.cancel("a", NOW) is not None, "put back: pending again, cancellable"
