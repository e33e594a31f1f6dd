"""Opening a broker reads its topics, queue groups and endpoints side by side when the
storage makes each read wait (an object store): a take-over with a topic per customer
must not wait one round trip after another for each of them."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any

import pytest

import brook
from brook import side_by_side
from brook.storage.memory import MemoryStorage
from tests.in_process import InProcess

WAIT_S = 0.02
"""Each read of a stored file waits this long, as a GET to an object store would."""


class SlowReads(MemoryStorage):
    """Memory whose whole-file reads wait a round trip; counts them side by side."""

    open_threads = 8

    def __init__(self) -> None:
        super().__init__()
        self.slow = False
        self._count = threading.Lock()
        self._now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()

    def read_all(self, name: str) -> bytes | None:
        if not self.slow:
            return super().read_all(name)
        kind = name.split("/", 1)[0]
        with self._count:
            self._now[kind] += 1
            self.peak[kind] = max(self.peak[kind], self._now[kind])
        try:
            time.sleep(WAIT_S)
            return super().read_all(name)
        finally:
            with self._count:
                self._now[kind] -= 1


def test_a_broker_opens_topics_groups_and_endpoints_side_by_side() -> None:
    storage = SlowReads()
    customers = [f"customer-{n}" for n in range(12)]
    with brook.Broker(storage, delivery_allow_private_networks=True) as b:
        for name in customers:
            b.topic(name).append(b"first", idempotency_key="once")
            queue = b.queue(name, "work", max_attempts=3)
            queue.ack(queue.lease(1, timeout=0))
            b.create_endpoint(f"hook-{name}", "http://127.0.0.1:9/", topics=[name])
    storage.slow = True
    with brook.Broker(storage, delivery_allow_private_networks=True) as b:
        assert sorted(t.name for t in b.topics() if t.name in customers) == sorted(customers)
        for name in customers:
            stats = b.queue(name, "work").stats()
            assert stats["acked"] == 1 and stats["ready"] == 0
            assert b.topic(name).append(b"again", idempotency_key="once").offset == 0
        assert {e.name for e in b.endpoints()} >= {f"hook-{n}" for n in customers}
    assert storage.peak["topics"] > 1, storage.peak
    assert storage.peak["queues"] > 1, storage.peak
    assert storage.peak["endpoints"] > 1, storage.peak


def test_every_item_is_worked_on_kept_in_order_and_the_first_failure_raised() -> None:
    kept: list[int] = []

    def work(n: int) -> int:
        if n in (3, 5):
            raise ValueError(f"item {n}")
        time.sleep(0.001 * (10 - n))  # later items finish first
        return n

    storage = SlowReads()
    with pytest.raises(ValueError, match="item 3"):
        side_by_side.each(storage, list(range(10)), work, kept.append)
    assert kept == [0, 1, 2, 4, 6, 7, 8, 9]
    kept.clear()
    side_by_side.each(MemoryStorage(), [1, 2], lambda n: n * 10, kept.append)  # one at a time
    assert kept == [10, 20]


class GatedLogs(MemoryStorage):
    """Memory whose logs (segments, status logs) of every topic but `open_topic` cannot be
    opened until `gate` is set: what a broker does before it may serve shows."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.open_topic = ""
        self.opened: Counter[str] = Counter()

    def _wait(self, name: str) -> None:
        if name.startswith("topics/customer-") or name.startswith("topics/__queues/customer-"):
            topic = name.removeprefix("topics/").removeprefix("__queues/").split("/")[0]
            if topic != self.open_topic:
                assert self.gate.wait(30), f"{name} opened before the gate opened"
            self.opened[topic] += 1

    def open_appendable(self, name: str) -> Any:
        self._wait(name)
        return super().open_appendable(name)

    def open_read(self, name: str) -> Any:
        self._wait(name)
        return super().open_read(name)


def test_a_broker_serves_a_topic_before_it_opens_the_others() -> None:
    """Opening reads each topic's config and each group's name, not their logs: a call
    on one topic opens its logs and its groups at once, while every other topic's wait;
    the rest open in the background once they can, and serve as they did."""
    storage = GatedLogs()
    customers = [f"customer-{n}" for n in range(20)]
    with brook.Broker(storage) as b:
        for name in customers:
            b.create_topic(name, partitions=2)
            b.topic(name).append(b"first", key=b"k", idempotency_key="once")
            queue = b.queue(name, "work", max_attempts=3)
            queue.ack(queue.lease(1, timeout=0))
            b.topic(name).append(b"second", key=b"k")
    storage.gate.clear()
    storage.opened.clear()
    storage.open_topic = "customer-7"
    with brook.Broker(storage) as b:
        try:
            again = b.topic("customer-7").append(b"again", key=b"k", idempotency_key="once")
            assert again.offset == 0
            queue = b.queue("customer-7", "work")
            assert queue.stats()["acked"] == 1
            [job] = queue.lease(1, timeout=0)
            assert job.record.value == b"second"
            assert set(storage.opened) == {"customer-7"}  # the others still wait
        finally:
            storage.gate.set()
        for name in customers:
            assert b.topic(name).append(b"x", key=b"k", idempotency_key="once").offset == 0
            assert b.queue(name, "work").stats()["acked"] == 1
        b.core._opening_done.wait(10)
        assert all(state.opened for state in b.core.topic_states())


def test_topics_opened_deleted_and_made_again_while_the_broker_opens_them(tmp_path: Any) -> None:
    """Calls race the background opening: appends, reads, listings, and deletions and
    re-creations of the same names. Nothing but TopicNotFound (a topic deleted under a
    call) is raised, and every append acknowledged since a topic was last made is read."""
    customers = [f"customer-{n}" for n in range(24)]
    with brook.open(tmp_path) as b:
        for name in customers:
            b.topic(name).append(b"0", idempotency_key="first")
            queue = b.queue(name, "work")
            queue.ack(queue.lease(1, timeout=0))
    acked: dict[str, list[bytes]] = {name: [b"0"] for name in customers}
    errors: list[BaseException] = []
    guard = threading.Lock()

    with brook.open(tmp_path) as b:

        def work(n: int) -> None:
            rng = random.Random(n)
            for i in range(40):
                name = rng.choice(customers)
                try:
                    if n == 0 and i % 5 == 0:
                        with guard:
                            b.delete_topic(name)
                            acked[name] = []
                    elif i % 7 == 0:
                        b.topics()
                    else:
                        value = f"{n}-{i}".encode()
                        with guard:
                            b.topic(name).append(value)
                            acked[name].append(value)
                        b.queue(name, "work").stats()
                        b.topic(name).read(0, 0, 10)
                except brook.errors.TopicNotFound:
                    pass
                except BaseException as exc:
                    errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        for name, values in acked.items():
            if values:
                assert [r.value for r in b.topic(name).read(0, 0, 1000)] == values, name


def test_a_topic_opening_on_the_server_never_stalls_the_others() -> None:
    """Over HTTP, the first append to (and listing of) a topic whose logs are not open
    yet opens them off the event loop: while they cannot open, the server answers every
    other call, and the append is answered once they do."""
    storage = GatedLogs()
    with brook.Broker(storage) as b:
        b.topic("customer-1").append(b"first")
        b.topic("other").append(b"first")
    storage.gate.clear()
    b = brook.Broker(storage)
    server = InProcess(b)
    answers: list[tuple[int, Any]] = []
    try:
        waiting = threading.Thread(
            target=lambda: answers.append(
                server.request("POST", "/v1/topics/customer-1/records", b"second")
            )
        )
        waiting.start()
        for _ in range(5):
            assert server.get("/v1/health")[0] == 200
            assert server.request("POST", "/v1/topics/other/records", b"x")[0] == 200
        assert not answers  # customer-1's logs still cannot open
    finally:
        storage.gate.set()
        waiting.join(30)
        server.close()
        b.close()
    assert answers[0][0] == 200 and answers[0][1]["acks"][0]["offset"] == 1
