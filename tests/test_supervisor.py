"""Background loops cannot die silently: each failure is logged, counted, shown by
/v1/health, retried, and every loop comes back once the cause is gone."""

from __future__ import annotations

import http.client
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from brook import limits
from brook.codec.batch import Columns
from brook.commit import AppendRequest
from brook.errors import CorruptData, LeaseExpired, StorageError
from brook.supervisor import Supervisor, retry_after_s
from tests import waiting
from tests.in_process import InProcess
from tests.waiting import slow


def eventually(check: Callable[[], object], seconds: float = 10) -> None:
    waiting.wait_for(check, seconds, every_s=0.01)


class Flaky:
    """Wraps a function so that its next `failures` calls raise `error` first."""

    def __init__(self, inner: Callable[..., Any], failures: int, error: Exception) -> None:
        self.inner = inner
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise self.error
        return self.inner(*args, **kwargs)


def test_retries_back_off_by_doubling_up_to_a_cap() -> None:
    delays = [retry_after_s(n) for n in range(1, 20)]
    assert delays[0] == limits.background_retry_ms_min / 1000
    assert delays[1] == 2 * delays[0]
    assert delays == sorted(delays)
    assert max(delays) == limits.background_retry_ms_max / 1000


def test_a_failing_loop_is_logged_counted_reported_and_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    supervisor = Supervisor()
    stop = threading.Event()
    passes = []
    step = Flaky(lambda: passes.append(1) or 0.01, 3, RuntimeError("boom"))
    with caplog.at_level(logging.INFO, logger="brook"):
        thread = supervisor.start("demo", step, stop)
        eventually(lambda: passes)
        stop.set()
        thread.join()
    assert supervisor.errors() == {"demo": 3}
    assert supervisor.failing() == []
    failures = [r for r in caplog.records if "demo failed unexpectedly" in r.getMessage()]
    assert len(failures) == 3 and all(r.exc_info for r in failures), "logged with traceback"
    assert any("demo works again after 3 failures" in r.getMessage() for r in caplog.records)


def test_a_guarded_task_reports_without_raising_until_it_works() -> None:
    supervisor = Supervisor()
    with supervisor.guard("maintenance", "retention of a/0"):
        raise CorruptData("bad batch")
    [failure] = supervisor.failing()
    assert (failure.loop, failure.task, failure.error) == (
        "maintenance",
        "retention of a/0",
        "bad batch",
    )
    with supervisor.guard("maintenance", "retention of b/0"):
        pass  # another task working does not clear this one
    assert len(supervisor.failing()) == 1
    with supervisor.guard("maintenance", "retention of a/0"):
        pass
    assert supervisor.failing() == [] and supervisor.errors() == {"maintenance": 1}


def test_the_queue_ticker_survives_an_unexpected_error(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        q = b.queue("jobs", "g", visibility_timeout_ms=50)
        b.topic("jobs").append(b"x")
        assert len(q.lease(1, timeout=5)) == 1
        group = b.queues.find("jobs", "g")
        assert group is not None
        group.tick = Flaky(group.tick, 2, RuntimeError("ticker bug"))  # type: ignore[method-assign]
        eventually(lambda: b.supervisor.errors().get("queues") == 2)
        # Once it works again, the ticker expires the lease by itself: the record is ready.
        eventually(lambda: q.stats()["ready"] == 1 and not b.supervisor.failing())
        assert q.lease(1, timeout=5)[0].attempt == 2


def test_the_timer_loop_survives_an_unexpected_error(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        timers = b.timers
        timers._fire_due = Flaky(timers._fire_due, 2, KeyError("timer bug"))  # type: ignore[method-assign]
        b.schedule("due", b"v", delay_ms=10)
        eventually(lambda: b.supervisor.errors().get("timers") == 2)
        eventually(
            lambda: b.topic("due").end_offsets() == {0: 1} if b.core.has_topic("due") else False
        )
        # The step that fired it reports success once it returns, a moment after the append.
        eventually(lambda: not b.supervisor.failing())


def test_the_staging_sweep_survives_an_unexpected_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "staging_sweep_ms", 20)
    with brook.open(str(tmp_path)) as b:
        b.staging.sweep = Flaky(b.staging.sweep, 2, ValueError("sweep bug"))  # type: ignore[method-assign]
        eventually(lambda: b.supervisor.errors().get("staging") == 2)
        eventually(lambda: not b.supervisor.failing())


def test_maintenance_goes_on_for_other_topics_when_one_fails(tmp_path: Path) -> None:
    with brook.open(str(tmp_path), segment_bytes_max=200) as b:
        for name in ("broken", "fine"):
            b.create_topic(name, retention_bytes=1)
            for i in range(20):
                b.topic(name).append(b"record %d" % i)
        broken = b.core.topic_state("broken").logs[0]
        broken.enforce_retention = Flaky(  # type: ignore[method-assign]
            broken.enforce_retention, 1, CorruptData("a bad segment")
        )
        b.core.run_maintenance()
        assert b.topic("fine").start_offsets()[0] > 0, "the other topic's retention ran"
        assert b.topic("broken").start_offsets()[0] == 0
        [failure] = b.supervisor.failing()
        assert failure.task == "retention of broken/0" and "a bad segment" in failure.error
        b.core.run_maintenance()  # the next round works: retention catches up and the report clears
        assert b.topic("broken").start_offsets()[0] > 0
        assert not b.supervisor.failing()


def test_a_completion_callback_that_raises_stops_no_answer(tmp_path: Path) -> None:
    """As when the event loop that asked has already closed."""
    with brook.open(str(tmp_path)) as b:
        log = b.core.topic_state("t", create=True).logs[0]

        def closed_loop(request: AppendRequest) -> None:
            raise RuntimeError("Event loop is closed")

        for _ in range(3):
            b.core.committer.submit(AppendRequest(log, Columns([b"x"], size_bytes=1), closed_loop))
        assert b.topic("t").append(b"after").offset == 3


def test_a_syncer_bug_answers_every_caller_and_the_syncer_goes_on(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        t = b.topic("t")
        t.append(b"first")
        committer = b.core.committer
        committer._sync_and_answer = Flaky(  # type: ignore[method-assign]
            committer._sync_and_answer, 1, AttributeError("syncer bug")
        )
        committer._previous_requests = 2  # no caller-led round: go through the threads
        with pytest.raises(StorageError, match="internal error while syncing"):
            t.append(b"lost in the bug")
        assert b.supervisor.errors() == {"syncer": 1}
        t.append(b"again")
        assert not b.supervisor.failing()


@pytest.fixture
def in_process(tmp_path: Path) -> Iterator[tuple[brook.Broker, InProcess]]:
    with brook.open(str(tmp_path)) as b:
        server = InProcess(b)
        try:
            yield b, server
        finally:
            server.close()


def test_health_names_a_failing_queue_group_in_its_detail_until_it_recovers(
    in_process: tuple[brook.Broker, InProcess],
) -> None:
    b, server = in_process
    assert server.get("/v1/health") == (200, {"status": "ok"})
    q = b.queue("jobs", "g", visibility_timeout_ms=50)
    group = b.queues.find("jobs", "g")
    assert group is not None
    failing = threading.Event()
    failing.set()
    real_tick = group.tick

    def tick() -> None:
        if failing.is_set():
            raise OSError("disk gone")
        real_tick()

    group.tick = tick  # type: ignore[method-assign]
    b.topic("jobs").append(b"x")
    assert len(q.lease(1, timeout=5)) == 1  # its lease's end is the ticker's to act on
    eventually(lambda: "isolated" in server.get("/v1/health")[1])
    status, body = server.get("/v1/health")
    assert status == 200 and body["status"] == "ok", "one group's failure is its own"
    [report] = body["isolated"]
    assert report["loop"] == "queues" and "OSError: disk gone" in report["error"]
    assert report["subject"] == "queue group jobs/g" and report["task"] == "tick"
    metrics = server_metrics(server)
    assert (
        'brook_subject_failing{loop="queues",subject="queue group jobs/g",task="tick"} 1.0'
        in metrics
    )
    failing.clear()
    eventually(lambda: server.get("/v1/health") == (200, {"status": "ok"}))
    metrics = server_metrics(server)
    assert 'brook_background_errors_total{loop="queues"}' in metrics


def server_metrics(server: InProcess) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", server.server.port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        return connection.getresponse().read().decode()
    finally:
        connection.close()


def test_random_failures_in_every_loop_lose_nothing_and_every_loop_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seeded: failures land at random in the queue ticker, the timer loop and the
    staging sweep while producers, workers and timers run. Every acked record is
    kept, every timer fires, every job is done once, and all loops end healthy."""
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    lock = threading.Lock()
    monkeypatch.setattr(limits, "staging_sweep_ms", 20)

    def sometimes(inner: Callable[..., Any], loop: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                fail = rng.random() < 0.3
            if fail:
                raise RuntimeError(f"injected into {loop}")
            return inner(*args, **kwargs)

        return call

    with brook.open(str(tmp_path), linger_ms=1) as b:
        # Unsettled leases end attempts; enough attempts that none dies of bad luck.
        q = b.queue("jobs", "g", visibility_timeout_ms=200, max_attempts=1_000)
        b.timers._load_buckets = sometimes(b.timers._load_buckets, "timers")  # type: ignore[method-assign]
        b.staging.sweep = sometimes(b.staging.sweep, "staging")  # type: ignore[method-assign]
        group = b.queues.find("jobs", "g")
        assert group is not None
        group.tick = sometimes(group.tick, "queues")  # type: ignore[method-assign]
        acked = [b.topic("jobs").append(b"job %d" % i).offset for i in range(200)]
        ids = [b.schedule("fired", b"t%d" % i, delay_ms=rng.randrange(0, 300)) for i in range(50)]
        done: set[bytes] = set()
        deadline = time.monotonic() + slow(60)
        while len(done) < 200:
            assert time.monotonic() < deadline, f"seed {seed}: jobs stuck"
            jobs = q.lease(20, timeout=0.5)
            settle = [j for j in jobs if rng.random() < 0.8]  # the rest expire and come back
            for job in settle:
                try:
                    q.ack(job)
                except LeaseExpired:  # held past its 200 ms lease (a busy machine): it comes back
                    continue
                done.add(job.record.value)
        assert acked == list(range(200))
        eventually(lambda: all((b.timer(i) or {}).state == "fired" for i in ids), 60)  # type: ignore[union-attr]
        fired = {r.value for r in b.topic("fired").read(0, 0, 1000)}
        assert fired == {b"t%d" % i for i in range(50)}, f"seed {seed}"
        # Once nothing fails any more, every loop reports healthy again.
        rng.seed(0)
        with lock:
            rng.random = lambda: 1.0  # type: ignore[method-assign]
        eventually(lambda: not b.supervisor.failing(), 30)
        assert sum(b.supervisor.errors().values()) > 0, f"seed {seed}: nothing was injected"


def test_the_s3_lease_loop_reports_an_unexpected_error_and_keeps_renewing(
    moto: Any, tmp_path: Path
) -> None:
    with brook.open(
        moto.fresh_url(), endpoint_url=moto.endpoint, cache_dir=str(tmp_path), lease_ms=1_000
    ) as b:
        storage: Any = b.storage
        assert storage.supervisor is b.supervisor, "the backend reports to the broker's supervisor"
        storage.change = Flaky(storage.change, 1, RuntimeError("lease bug"))
        eventually(lambda: b.supervisor.errors().get("s3-lease") == 1)
        eventually(lambda: storage.change.calls >= 2 and not b.supervisor.failing())
        b.topic("t").append(b"still the owner")
