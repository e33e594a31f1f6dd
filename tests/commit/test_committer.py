"""The committer answers every caller, in every outcome."""

from __future__ import annotations

import threading

import pytest

import brook
from brook.errors import Closed
from brook.storage.memory import MemoryStorage


def test_close_answers_in_flight_callers_first() -> None:
    b = brook.Broker(MemoryStorage(), linger_ms=200)
    t = b.topic("t")
    t.append(b"first")
    results: list[object] = []

    def produce() -> None:
        try:
            results.append(t.append(b"x"))
        except Closed as exc:
            results.append(exc)

    threads = [threading.Thread(target=produce) for _ in range(4)]
    for thread in threads:
        thread.start()
    b.close()
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive(), "a caller was left waiting"
    assert len(results) == 4


def test_control_work_errors_reach_the_caller() -> None:
    with brook.Broker(MemoryStorage()) as b:

        def boom() -> None:
            raise ValueError("from the writer thread")

        with pytest.raises(ValueError, match="writer thread"):
            b.core.committer.call(boom)
        assert b.topic("t").append(b"still works").offset == 0
