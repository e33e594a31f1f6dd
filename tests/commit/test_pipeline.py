"""The writer/syncer pipeline: order, failures with batches in flight, de-duplication in flight."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import brook
from brook import limits
from brook.codec.batch import Columns
from brook.commit import AppendRequest, Waiter
from brook.errors import Overloaded, RecordTooLarge, StorageError
from brook.records import Ack, Record
from brook.storage.faulty import FaultyStorage
from brook.storage.local import LocalStorage
from tests.waiting import slow


def run_threads(count: int, target) -> None:  # type: ignore[no-untyped-def]
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_concurrent_repeats_of_one_idempotency_key_append_once(broker: brook.Broker) -> None:
    t = broker.topic("t")
    acks: list[Ack] = []
    lock = threading.Lock()

    def produce(i: int) -> None:
        for round_ in range(20):
            ack = t.append(f"payment-{round_}".encode(), idempotency_key=f"pay-{round_}")
            with lock:
                acks.append(ack)

    run_threads(16, produce)
    stored = t.read(0, 0, 1000)
    assert len(stored) == 20, "each key appended exactly once"
    by_key = {r.value: r.offset for r in stored}
    assert len(set(acks)) == 20
    for ack in acks:
        assert stored[ack.offset].offset == ack.offset
    assert sorted(by_key.values()) == list(range(20))


def test_a_failed_sync_fails_every_batch_in_flight_and_nothing_of_them_is_read(
    tmp_path: Path,
) -> None:
    faulty = FaultyStorage(LocalStorage(tmp_path))
    with brook.Broker(faulty) as b:
        t = b.topic("t")
        t.append(b"before")
        outcomes: Counter[str] = Counter()
        acked: list[Ack] = []
        lock = threading.Lock()
        start = threading.Barrier(8)

        def produce(i: int) -> None:
            start.wait()
            for n in range(30):
                if i == 0 and n == 10:
                    faulty.faults.sync_failures = 2
                try:
                    ack = t.append(f"{i}-{n}".encode())
                except StorageError:
                    with lock:
                        outcomes["failed"] += 1
                else:
                    with lock:
                        outcomes["acked"] += 1
                        acked.append(ack)

        run_threads(8, produce)
        assert outcomes["failed"] > 0 and outcomes["acked"] > 0
        stored = t.read(0, 0, 10_000)
        assert [r.offset for r in stored] == list(range(len(stored))), "offsets stay dense"
        assert len(stored) == 1 + outcomes["acked"], (
            "every stored record was acknowledged, and only those"
        )
        for ack in acked:
            assert stored[ack.offset].offset == ack.offset
    with brook.Broker(faulty) as b:
        assert len(b.topic("t").read(0, 0, 10_000)) == 1 + outcomes["acked"]


def test_an_oversized_append_many_is_refused_whole(
    broker: brook.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "append_bytes_max", 1000)
    with pytest.raises(RecordTooLarge, match="split it"):
        broker.topic("t").append_many([Record(b"x" * 100)] * 11)
    with pytest.raises(RecordTooLarge, match="split it"):
        broker.topic("t").append_many([Record(b"x" * 100, key=b"k")] * 11)
    assert broker.topic("t").append_many([Record(b"x" * 100)] * 10)[-1].offset == 9


def test_rounds_stay_within_batch_bytes_max(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), batch_bytes_max=4096, linger_ms=20) as b:
        t = b.topic("t")

        def produce(i: int) -> None:
            t.append_many([Record(bytes(1000))] * 3)

        run_threads(12, produce)
        state = b.core.topic_state("t")
        segment = state.logs[0].segments[-1]
        sizes = [
            b - a
            for a, b in zip(
                segment.positions, [*segment.positions[1:], segment.durable_bytes], strict=True
            )
        ]
        assert max(sizes) < 4096 + 3100, "a batch holds at most batch_bytes_max plus one request"
        assert t.end_offsets() == {0: 36}


def test_segments_roll_while_batches_are_in_flight(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), segment_bytes_max=2000) as b:
        t = b.topic("t")

        def produce(i: int) -> None:
            for n in range(25):
                t.append(f"{i}:{n}".encode() * 10)

        run_threads(8, produce)
        assert len(b.core.topic_state("t").logs[0].segments) >= 3
        stored = t.read(0, 0, 1000)
        assert [r.offset for r in stored] == list(range(200))
    with brook.open(str(tmp_path), segment_bytes_max=2000) as b:
        assert len(b.topic("t").read(0, 0, 1000)) == 200


def test_a_clients_batches_share_a_round_with_idempotent_records() -> None:
    """A round mixing a client's batches (appended as they are) with records that need
    de-duplication decodes the batches instead; every caller gets its own acks."""
    from brook.codec import encode_batch
    from brook.codec.batch import Columns, read_client_batches
    from brook.commit import AppendRequest, Waiter
    from brook.storage.memory import MemoryStorage

    with brook.Broker(MemoryStorage()) as b:
        log = b.core.topic_state("t", create=True).logs[0]
        first = b.core.committer.append(AppendRequest(log, Columns([b"k0"], idempotency=[b"key"])))
        hold, release = threading.Event(), threading.Event()

        def occupy_writer() -> None:
            hold.set()
            release.wait()

        holder = threading.Thread(target=b.core.committer.call, args=(occupy_writer,))
        holder.start()
        hold.wait()
        body = b"".join(encode_batch(0, 0, Columns([b"c0", b"c1"], keys=[b"x", None])))
        requests = [
            AppendRequest(log, Columns([b"again"], idempotency=[b"key"]), Waiter()),
            AppendRequest(log, read_client_batches(body), Waiter()),
            AppendRequest(log, Columns([b"plain"]), Waiter()),
        ]
        for request in requests:
            b.core.committer.submit(request)
        release.set()
        holder.join()
        for request in requests:
            assert isinstance(request.on_done, Waiter)
            request.on_done.wait()
        assert requests[0].result() == first, "the repeat is answered with the first ack"
        assert [a.offset for a in requests[1].result()] == [1, 2]
        assert [a.offset for a in requests[2].result()] == [3]
        stored = b.topic("t").read(0, 0, 10)
        assert [(r.value, r.key) for r in stored] == [
            (b"k0", None),
            (b"c0", b"x"),
            (b"c1", None),
            (b"plain", None),
        ]


def test_partitions_of_one_round_are_synced_side_by_side() -> None:
    """A PUT to S3 takes tens of ms; a round touching several partitions waits for one, not all."""
    from typing import Any

    from brook.partitioner import partition_for_key
    from brook.storage.memory import MemoryStorage

    active = 0
    most = 0
    lock = threading.Lock()
    release = threading.Event()

    class SlowSync:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def sync(self) -> None:
            nonlocal active, most
            with lock:
                active += 1
                most = max(most, active)
                if most >= 2:
                    release.set()
            release.wait(timeout=2)  # long enough for a second sync to start beside it
            with lock:
                active -= 1
            self._inner.sync()

    class SlowStorage:
        write_ahead_log = False  # as S3: each partition a round wrote is synced (a PUT)

        def __init__(self) -> None:
            self._inner = MemoryStorage()

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def create_appendable(self, name: str, initial: bytes) -> Any:
            return SlowSync(self._inner.create_appendable(name, initial))

    with brook.Broker(SlowStorage()) as b:  # type: ignore[arg-type]
        b.create_topic("t", partitions=2)
        keys = [b"a", b"b", b"c", b"d"]
        assert len({partition_for_key(k, 2) for k in keys}) == 2
        acks = b.topic("t").append_many([Record(b"v", key=k) for k in keys])
        assert {a.partition for a in acks} == {0, 1}
    assert most == 2, "the two partitions' syncs ran at the same time"


def test_a_batch_cut_by_a_failed_sync_is_not_acked_with_a_later_durable_batch(
    tmp_path: Path,
) -> None:
    """R1 is written, then the failed sync of R0 (of the write-ahead log) fails R1 too;
    R2 is written where R1 was once both are answered and the log is cut back. R1 must
    fail: its bytes are gone, and acking it would lose an acknowledged record; and R2,
    acknowledged, must be what a restart finds at its offset (not R1, replayed)."""
    faulty = FaultyStorage(LocalStorage(tmp_path))
    with brook.Broker(faulty) as b:
        b.create_topic("t")
        log = b.core.topic_state("t").logs[0]
        syncing, release_sync = threading.Event(), threading.Event()
        r0_answered, release_answer = threading.Event(), threading.Event()
        syncs = []

        def hold_first_sync() -> None:
            syncs.append(1)
            if len(syncs) == 1:
                syncing.set()
                assert release_sync.wait(10)
                faulty.faults.sync_failures = 1  # this sync fails

        def hold_answer(request: AppendRequest) -> None:
            r0_answered.set()
            assert release_answer.wait(10)

        def wait_until(check) -> None:  # type: ignore[no-untyped-def]
            deadline = time.monotonic() + slow(10)
            while not check():
                assert time.monotonic() < deadline
                time.sleep(0.001)

        faulty.faults.before_sync = hold_first_sync
        r0 = AppendRequest(log, Columns([b"r0"], size_bytes=2), hold_answer)
        b.core.committer.submit(r0)
        assert syncing.wait(10)
        r1 = AppendRequest(log, Columns([b"r1"], size_bytes=2), Waiter())
        b.core.committer.submit(r1)
        wait_until(lambda: log.next_offset == 2)  # r1 is written behind r0
        release_sync.set()
        assert r0_answered.wait(10)  # r0's sync failed: the file is cut back to nothing
        r2 = AppendRequest(log, Columns([b"r2"], size_bytes=2), Waiter())
        b.core.committer.submit(r2)
        release_answer.set()
        for request in (r1, r2):
            assert isinstance(request.on_done, Waiter)
            request.on_done.wait()
        assert isinstance(r0.error, StorageError)
        assert isinstance(r1.error, StorageError), f"r1 was acked: {r1.acks}"
        assert r2.result() == [Ack(0, 0, r2.result()[0].timestamp)]
        assert [r.value for r in b.topic("t").read(0, 0)] == [b"r2"]
        faulty.faults.before_sync = None
    with brook.Broker(LocalStorage(tmp_path)) as b:
        assert [r.value for r in b.topic("t").read(0, 0)] == [b"r2"]


def test_the_committer_queue_is_capped_and_refuses_with_overloaded(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        log = b.core.topic_state("t", create=True).logs[0]
        b.core.committer.queue_bytes_max = 100
        busy, release = threading.Event(), threading.Event()

        def occupy_writer() -> None:
            busy.set()
            assert release.wait(10)

        holder = threading.Thread(target=b.core.committer.call, args=(occupy_writer,))
        holder.start()
        assert busy.wait(10)
        first = AppendRequest(log, Columns([b"x" * 80], size_bytes=80), Waiter())
        b.core.committer.submit(first)  # one request is always taken, however large
        with pytest.raises(Overloaded, match="commit_queue_bytes_max"):
            b.core.committer.submit(
                AppendRequest(log, Columns([b"y" * 40], size_bytes=40), Waiter())
            )
        release.set()
        holder.join()
        assert isinstance(first.on_done, Waiter)
        first.on_done.wait()
        assert first.result()[0].offset == 0
        assert b.topic("t").append(b"after").offset == 1, "the queue takes appends again"
