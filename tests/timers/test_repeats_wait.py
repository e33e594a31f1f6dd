"""A timer scheduled again while its first schedule is not durable yet (a client that
sent again after a slow answer) is acknowledged only once that first entry is durable:
otherwise a crash could lose a timer acknowledged twice (found by chaos seed 1, with
the broker's writer stalled)."""

from __future__ import annotations

import threading
import time

import brook
from tests.waiting import slow


def test_a_repeat_waits_for_the_first_schedule_to_be_durable() -> None:
    with brook.open("memory://") as b:
        b.topic("t").append(b"warm")
        held, release = threading.Event(), threading.Event()

        def hold_the_writer() -> None:
            held.set()
            release.wait(slow(30))

        writer = threading.Thread(target=lambda: b.core.call(hold_the_writer))
        writer.start()
        assert held.wait(slow(10))
        answered: list[str] = []

        def schedule(who: str) -> None:
            b.schedule("t", b"v", delay_ms=60_000, timer_id="once")
            answered.append(who)

        first = threading.Thread(target=schedule, args=("first",))
        first.start()
        time.sleep(0.2)  # the first is taken, its entry waits for the writer
        again = threading.Thread(target=schedule, args=("again",))
        again.start()
        again.join(0.5)
        assert answered == [], "acknowledged before anything was durable"
        release.set()
        first.join(slow(10))
        again.join(slow(10))
        writer.join(slow(10))
        assert sorted(answered) == ["again", "first"]
        info = b.timer("once")
        assert info is not None and info.state == "pending"
