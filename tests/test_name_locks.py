"""Locks by name: one name's holders take turns, other names go side by side, and
nothing is kept for a name no one holds."""

from __future__ import annotations

import threading

from brook.name_locks import NameLocks


def test_one_name_takes_turns_and_others_go_side_by_side() -> None:
    locks = NameLocks()
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def hold_a(label: str) -> None:
        with locks.hold("a"):
            order.append(label)
            inside.set()
            release.wait(5)

    first = threading.Thread(target=hold_a, args=("first",))
    first.start()
    assert inside.wait(5)
    second = threading.Thread(target=hold_a, args=("second",))
    second.start()
    with locks.hold("b"):  # another name is not held up
        assert order == ["first"]
    release.set()
    first.join(5)
    second.join(5)
    assert order == ["first", "second"]
    assert len(locks) == 0


def test_an_error_inside_releases_the_name() -> None:
    locks = NameLocks()
    try:
        with locks.hold("a"):
            raise KeyError("boom")
    except KeyError:
        pass
    assert len(locks) == 0
    with locks.hold("a"):
        assert len(locks) == 1
