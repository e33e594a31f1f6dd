"""Ownership of a bucket prefix (SPEC §0): leases, take-overs from a live broker, fences,
read-only opens, and stores that ignore conditional writes. On moto's server.

The promise under test: a broker taking a prefix over from one that is still
writing sees every record the old one acknowledged, nothing the old one writes
afterwards ever becomes visible, offsets stay dense, and the prefix always opens
again. Randomized tests print their seed; set BROOK_SEED to replay.
"""

from __future__ import annotations

import base64
import http.client
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.broker import Broker
from brook.errors import BrookError, Fenced, Locked, ReadOnly, StorageError
from brook.storage.s3 import S3Storage
from brook.storage.s3.objects import Bucket
from tests.s3proxy import FaultyProxy
from tests.s3server import MotoServer
from tests.storage.test_s3 import Wrapped, abandon
from tests.waiting import slow

TAKE_OVERS = int(os.environ.get("BROOK_TAKE_OVERS", "3"))


def opened(moto: MotoServer, url: str, **options: Any) -> Broker:
    return brook.open(url, endpoint_url=moto.endpoint, **options)


class Appenders:
    """Threads appending one record per call to topic "t" of a broker, noting every ack,
    until stopped or refused (Fenced once another broker took over)."""

    def __init__(self, b: Broker, tag: str, threads: int = 3) -> None:
        self.acked: dict[tuple[int, int], bytes] = {}
        self.refusals: list[BrookError] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(b, f"{tag}/{i}"), daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, b: Broker, tag: str) -> None:
        topic = b.topic("t")
        n = 0
        while not self._stop.is_set():
            value = f"{tag}/{n}".encode()
            n += 1
            try:
                ack = topic.append(value, key=value[-1:])
            except BrookError as exc:
                with self._lock:
                    self.refusals.append(exc)
                if isinstance(exc, Fenced):
                    return
                continue
            with self._lock:
                self.acked[(ack.partition, ack.offset)] = value

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + slow(30)
        while len(self.acked) < count:
            assert time.monotonic() < deadline, "the appenders made no progress"
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), "an appender hung"


def check_holds(b: Broker, acked: dict[tuple[int, int], bytes], context: str) -> int:
    """Every acknowledged record is there at its offset, and offsets are dense; how many."""
    topic = b.topic("t")
    total = 0
    for partition, end in topic.end_offsets().items():
        stored = []
        while batch := topic.read(partition, len(stored), 5000):
            stored.extend(batch)
        assert [r.offset for r in stored] == list(range(end)), f"offsets not dense ({context})"
        for (p, offset), value in acked.items():
            if p == partition:
                assert offset < end, f"acknowledged {p}/{offset} lost ({context})"
                assert stored[offset].value == value, f"{p}/{offset} is another record ({context})"
        total += end
    return total


# ------------------------------------------------------------------ the lease


def test_a_live_owner_makes_a_second_open_fail_fast_and_a_clean_close_lets_the_next_in(
    moto: MotoServer,
) -> None:
    url = moto.fresh_url()
    owner = opened(moto, url)
    owner.topic("t").append(b"mine")
    started = time.monotonic()
    with pytest.raises(Locked, match="take_over=True"):
        opened(moto, url)
    assert time.monotonic() - started < 2, "a live lease is refused at once"
    owner.topic("t").append(b"undisturbed")
    owner.close()  # releases the lease
    started = time.monotonic()
    with opened(moto, url) as next_one:
        assert time.monotonic() - started < 2, "a released lease is not waited for"
        assert [r.value for r in next_one.topic("t").read(0, 0, 10)] == [b"mine", b"undisturbed"]


def test_a_crashed_owners_lease_is_waited_out_but_a_renewed_one_is_not(
    moto: MotoServer,
) -> None:
    url = moto.fresh_url()
    crashed = opened(moto, url, lease_ms=1_500)
    crashed.topic("t").append(b"acked before the crash")
    storage = crashed.storage
    assert isinstance(storage, S3Storage)
    _stop_renewing(storage)  # the process is gone: nobody renews, nobody releases
    with pytest.raises(Locked):
        opened(moto, url)  # still live: refused at once without waiting
    started = time.monotonic()
    with opened(moto, url, wait_for_lease=True, lease_ms=2_000) as successor:
        waited = time.monotonic() - started
        assert 0.3 < waited < 5, f"waited {waited:.1f} s for a 1.5 s lease"
        assert [r.value for r in successor.topic("t").read(0, 0, 10)] == [b"acked before the crash"]
        started = time.monotonic()
        with pytest.raises(Locked, match="renewing"):
            opened(moto, url, wait_for_lease=True)  # the successor is alive and renews
        assert time.monotonic() - started < 3, "a renewed lease is refused within a renewal"
    abandon(crashed)


def _stop_renewing(storage: S3Storage) -> None:
    """What a crash does to the lease: nobody renews it, and close() will not release it."""
    assert storage.owner.stop_keeping()


def test_an_expired_lease_is_taken_without_the_flag(moto: MotoServer) -> None:
    url = moto.fresh_url()
    crashed = opened(moto, url, lease_ms=1_000)
    crashed.topic("t").append(b"x")
    storage = crashed.storage
    assert isinstance(storage, S3Storage)
    _stop_renewing(storage)
    time.sleep(1.2)
    with opened(moto, url) as successor:
        assert successor.topic("t").end_offsets() == {0: 1}
    with pytest.raises(Fenced):
        crashed.topic("t").append(b"too late")
    abandon(crashed)


# ------------------------------------------------------------------ take-overs


class PausedAt(Wrapped):
    """A bucket that runs `hook` once, the first time `method` is called on a key
    starting with `prefix`, and holds every other such call until it is done: an
    injected pause at that step of a take-over."""

    def __init__(self, inner: Bucket, method: str, prefix: str, hook: Any) -> None:
        super().__init__(inner)
        self._method, self._prefix, self._hook = method, prefix, hook
        self._first = threading.Lock()
        self._done = threading.Event()
        self.ran = False

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.inner, name)
        if name != self._method:
            return call

        def paused(key: str, *args: Any) -> Any:
            if key.startswith(self._prefix):
                if self._first.acquire(blocking=False):
                    self._hook()
                    self.ran = True
                    self._done.set()
                self._done.wait(timeout=30)
            return call(key, *args)

        return paused


@pytest.mark.parametrize(
    ("step", "appends"), [("list_slice", 1), ("create", 1), ("create", 2), ("create", 3)]
)
def test_records_the_old_owner_acks_during_a_take_over_are_seen_by_the_new_one(
    moto: MotoServer, step: str, appends: int
) -> None:
    """The old broker acknowledges records between the newcomer's epoch change and its
    listing of the chunks ("list_slice"), or between the listing and its first fence
    ("create"; two or three of them take the fence's first window and more): the
    newcomer must read them, and hand their offsets to nobody else."""
    url = moto.fresh_url()
    old = opened(moto, url, linger_ms=0)
    old.topic("t").append(b"before")
    during: list[Any] = []

    def old_appends() -> None:
        for i in range(appends):
            during.append(old.topic("t").append(b"during %d" % i))

    storage = S3Storage(url, endpoint_url=moto.endpoint, take_over=True)
    storage.bucket = PausedAt(storage.bucket, step, "chunks", old_appends)  # type: ignore[assignment]
    new = Broker(storage)
    assert storage.bucket.ran  # type: ignore[attr-defined]
    assert len(during) == appends, "acked before the fence"
    with pytest.raises(Fenced):
        old.topic("t").append(b"after the fence")
    mine = new.topic("t").append(b"new owner")
    assert mine.offset == during[-1].offset + 1, "the old owner's offsets are not handed out again"
    expected = [b"before", *(b"during %d" % i for i in range(appends)), b"new owner"]
    assert [r.value for r in new.topic("t").read(0, 0, 10)] == expected
    abandon(old)
    new.close()
    with opened(moto, url) as third:
        assert [r.value for r in third.topic("t").read(0, 0, 10)] == expected


def test_a_busy_broker_is_taken_over_within_seconds(moto: MotoServer) -> None:
    url = moto.fresh_url()
    old = opened(moto, url, linger_ms=0)
    old.create_topic("t", partitions=2)
    appenders = Appenders(old, "old", threads=4)
    appenders.wait_for(200)
    started = time.monotonic()
    new = opened(moto, url, take_over=True)
    took = time.monotonic() - started
    appenders.stop()
    assert took < 5, f"the take-over took {took:.1f} s"
    assert any(isinstance(e, Fenced) for e in appenders.refusals), "the old broker was fenced"
    check_holds(new, appenders.acked, "after a busy take-over")
    abandon(old)
    new.close()


def test_a_busy_catalog_does_not_keep_a_take_over_out(moto: MotoServer) -> None:
    """An owner committing group positions back to back changes the manifest all the
    time; the newcomer's claim makes it pause, so the take-over still succeeds."""
    url = moto.fresh_url()
    old = opened(moto, url, lease_ms=1_500)
    old.topic("t").append_many([brook.Record(b"%d" % i) for i in range(100)])
    stop = threading.Event()
    commits: list[int] = []

    def commit_constantly() -> None:
        consumer = old.consumer("t", "g")
        offset = 0
        while not stop.is_set():
            offset = offset % 100 + 1
            try:
                consumer.commit({0: offset})
            except Fenced:
                return
            commits.append(offset)

    committer = threading.Thread(target=commit_constantly)
    committer.start()
    while len(commits) < 20:
        time.sleep(0.01)
    started = time.monotonic()
    new = opened(moto, url, take_over=True)
    took = time.monotonic() - started
    stop.set()
    committer.join(timeout=30)
    assert took < 10, f"the take-over took {took:.1f} s"
    last = commits[-1]
    assert new.consumer("t", "g").committed() == {0: last}, "the last acknowledged commit holds"
    abandon(old)
    new.close()


def test_brokers_taking_over_from_each_other_at_random_moments_lose_nothing(
    moto: MotoServer,
) -> None:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"take-over test seed: {seed} (replay with BROOK_SEED={seed})")
    rng = random.Random(seed)
    url = moto.fresh_url()
    acked: dict[tuple[int, int], bytes] = {}
    current = opened(moto, url, linger_ms=rng.choice([0, 2]))
    current.create_topic("t", partitions=3)
    for round_ in range(TAKE_OVERS):
        appenders = Appenders(current, f"r{round_}", threads=rng.randrange(1, 5))
        appenders.wait_for(rng.randrange(1, 60))
        time.sleep(rng.uniform(0, 0.2))
        successor = opened(moto, url, take_over=True, linger_ms=rng.choice([0, 2]))
        appenders.stop()
        acked.update(appenders.acked)
        abandon(current)
        current = successor
        check_holds(current, acked, f"seed {seed}, take-over {round_}")
    current.close()
    with opened(moto, url) as last:
        total = check_holds(last, acked, f"seed {seed}, reopened")
    assert total >= len(acked) > TAKE_OVERS, f"too few acks to mean anything (seed {seed})"


def test_queue_acks_and_timers_the_old_owner_acknowledged_survive_a_take_over(
    moto: MotoServer,
) -> None:
    """Status logs and the timer log are fenced like any partition: an ack or a schedule
    the old broker answered holds for the new one."""
    url = moto.fresh_url()
    old = opened(moto, url, linger_ms=0)
    old.topic("jobs").append_many([brook.Record(b"%d" % i) for i in range(300)])
    queue = old.queue("jobs", "w")
    acked: set[int] = set()
    leased: set[int] = set()
    scheduled: list[str] = []
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            try:
                jobs = queue.lease(max_records=5, timeout=0)
                leased.update(j.record.offset for j in jobs)
                queue.ack(jobs)
            except BrookError:
                return
            acked.update(j.record.offset for j in jobs)

    def schedule() -> None:
        while not stop.is_set():
            try:
                scheduled.append(old.schedule("later", b"v", delay_ms=3_600_000))
            except BrookError:
                return

    threads = [threading.Thread(target=work), threading.Thread(target=schedule)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + slow(30)
    while len(acked) < 30 or len(scheduled) < 10:
        assert time.monotonic() < deadline, "the old broker made no progress"
        time.sleep(0.01)
    new = opened(moto, url, take_over=True)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    handed_out: set[int] = set()
    new_queue = new.queue("jobs", "w")
    while jobs := new_queue.lease(max_records=100, timeout=0):
        handed_out.update(j.record.offset for j in jobs)
        new_queue.ack(jobs)
    assert not acked & handed_out, "a record the old broker acked was handed out again"
    still_leased = leased - acked  # their leases run out later, then they are ready again
    assert acked | handed_out | still_leased == set(range(300)), "no record left the queue"
    for timer_id in scheduled:
        info = new.timer(timer_id)
        assert info is not None and info.state == "pending", timer_id
    abandon(old)
    new.close()


# ------------------------------------------------------------------ read-only opens


def test_a_read_only_open_reads_beside_the_owner_and_never_disturbs_it(
    moto: MotoServer,
) -> None:
    url = moto.fresh_url()
    owner = opened(moto, url)
    owner.create_topic("t", partitions=2)
    acks = owner.topic("t").append_many([brook.Record(b"r%d" % i) for i in range(20)])
    owner.consumer("t", "g").commit({0: 3})
    with opened(moto, url, read_only=True) as reader:
        assert [(t.name, t.partitions) for t in reader.topics()] == [("t", 2)]
        assert reader.topic("t").end_offsets() == owner.topic("t").end_offsets()
        read = reader.topic("t").read(acks[0].partition, acks[0].offset, 1)
        assert read[0].value == b"r0"
        assert reader.consumer("t", "g").committed()[0] == 3
        for write in (
            lambda: reader.topic("t").append(b"no"),
            lambda: reader.create_topic("other"),
            lambda: reader.delete_topic("t"),
            lambda: reader.consumer("t", "g").commit({0: 4}),
            lambda: reader.schedule("t", b"later", delay_ms=1000),
        ):
            with pytest.raises(ReadOnly, match="read-only"):
                write()
    owner.topic("t").append(b"still the owner")  # not fenced, not locked out
    owner.close()


def test_a_read_only_open_of_an_empty_prefix_takes_nothing(moto: MotoServer) -> None:
    url = moto.fresh_url()
    with pytest.raises(StorageError, match="no Brook data"):
        opened(moto, url, read_only=True)
    with opened(moto, url) as first_owner:  # nothing was created or claimed
        first_owner.topic("t").append(b"x")


# ------------------------------------------------------------------ unsafe stores


@pytest.mark.parametrize("fresh", [True, False])
def test_a_store_that_ignores_conditional_writes_is_refused(moto: MotoServer, fresh: bool) -> None:
    url = moto.fresh_url()
    if not fresh:
        with opened(moto, url) as b:
            b.topic("t").append(b"kept")
    proxy = FaultyProxy(moto.port)
    proxy.ignore_conditions = True
    try:
        with pytest.raises(StorageError, match="ignores If-None-Match"):
            brook.open(url, endpoint_url=proxy.endpoint)
    finally:
        proxy.close()
    with opened(moto, url) as check:  # the refused broker changed nothing
        if fresh:
            assert check.topics() == []
        else:
            assert [r.value for r in check.topic("t").read(0, 0, 10)] == [b"kept"]
        bucket = check.storage.bucket  # type: ignore[attr-defined]
        assert bucket.list("probe/") == [], "the probe cleans up after itself"


# ------------------------------------------------------------------ cold start


def test_a_cold_start_reads_many_unmerged_chunks_side_by_side(moto: MotoServer) -> None:
    url = moto.fresh_url()
    storage = S3Storage(url, endpoint_url=moto.endpoint)
    storage.merger.close()  # leave every chunk unmerged
    with Broker(storage) as b:
        t = b.topic("t")
        for i in range(300):
            t.append(b"%03d" % i)
    fresh = S3Storage(url, endpoint_url=moto.endpoint)
    peak = _count_concurrent_gets(fresh)
    with Broker(fresh) as again:
        assert [r.value for r in again.topic("t").read(0, 0, 1000)] == [
            b"%03d" % i for i in range(300)
        ]
    assert peak() > 4, "chunks are fetched several at a time"


def _count_concurrent_gets(storage: S3Storage) -> Any:
    inner = storage.bucket
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def counted(call: Any, *args: Any) -> Any:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        try:
            time.sleep(0.002)  # a little latency, as a real store has
            return call(*args)
        finally:
            with lock:
                state["now"] -= 1

    class Counting(Wrapped):
        def get(self, key: str) -> Any:
            return counted(inner.get, key)

        def get_range(self, key: str, start: int, end: int) -> Any:
            return counted(inner.get_range, key, start, end)

    storage.bucket = Counting(inner)  # type: ignore[assignment]
    return lambda: state["peak"]


# ------------------------------------------------------------------ served: a rolling deploy


def test_a_rolling_deploy_of_brook_serve_loses_no_record_either_server_acknowledged(
    moto: MotoServer, tmp_path: Path
) -> None:
    """Three HTTP producers write to `brook serve`; a second `brook serve --take-over`
    starts on the same prefix; producers move to it when the first refuses. Every
    record either server answered 200 is readable afterwards, at its offset."""
    from tests.crash.test_kill9_server import check_acknowledged, value_for
    from tests.served import Served

    url = moto.fresh_url()
    with opened(moto, url) as b:
        b.create_topic("crash", partitions=3)

    def serve(name: str, *extra: str) -> Served:
        return Served(
            tmp_path / name,
            "--storage",
            url,
            "--endpoint-url",
            moto.endpoint,
            "--cache-dir",
            str(tmp_path / name / "cache"),
            *extra,
            measured=True,
        )

    expected: dict[tuple[int, int], bytes] = {}

    def producing(server: Served, run: int, seconds: float, during: Any = None) -> None:
        stop = threading.Event()
        acked: list[tuple[int, int, int, int]] = []
        producers = [
            threading.Thread(target=_produce_until_refused, args=(server, run, t, stop, acked))
            for t in range(3)
        ]
        for producer in producers:
            producer.start()
        time.sleep(seconds)
        if during is not None:
            during()
        stop.set()
        for producer in producers:
            producer.join(timeout=60)
        for thread, seq, partition, offset in acked:
            expected[(partition, offset)] = value_for(run, thread, seq)

    old = serve("old")
    started: list[Served] = []
    try:
        # The new server starts while the old one is busy: it takes over, the old one stops.
        producing(old, 0, 0.5, lambda: started.append(serve("new", "--take-over")))
        assert old.process.wait(timeout=30) == 1, "the fenced server stops"
        assert "fenced" in "".join(old.log)
        new = started[0]
        producing(new, 1, 0.5)
        assert new.stop() == 0
    finally:
        old.close()
        for server in started:
            server.close()
    with opened(moto, url) as after:
        check_acknowledged(after, expected, "after a rolling deploy")
    assert len(expected) > 20, "too few acks to mean anything"


def _produce_until_refused(
    server: Any, run: int, thread: int, stop: threading.Event, acked: list[Any]
) -> None:
    """POST one record at a time until stopped or refused (409 fenced, or the server gone);
    note (thread, seq, partition, offset) of every 200."""
    from tests.crash.test_kill9_server import value_for

    seq = 0
    while not stop.is_set():
        value = value_for(run, thread, seq)
        try:
            status, body = server.request(
                "POST",
                "/v1/topics/crash/records",
                {"records": [{"value_b64": base64.b64encode(value).decode()}]},
            )
        except (OSError, http.client.HTTPException):
            return
        if status != 200:
            assert status in (409, 503), body
            return
        ack = body["acks"][0]
        acked.append((thread, seq, ack["partition"], ack["offset"]))
        seq += 1
