"""brook.App embedded (a directory, no server): what a task's author meets, in-process."""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.errors import BadRequest, Conflict, GroupNotFound
from brook.tasks import payload
from brook.tasks.worker import Worker
from tests.served import Served
from tests.waiting import slow


@pytest.fixture
def app(tmp_path: Path) -> Iterator[brook.App]:
    application = brook.App(str(tmp_path / "data"))
    yield application
    application.close()


def _run(app: brook.App, until: Any, timeout: float = 10.0) -> None:
    worker = Worker(app, concurrency=4)
    thread = threading.Thread(target=lambda: worker.run(install_signals=False))
    thread.start()
    try:
        deadline = time.monotonic() + slow(timeout)
        while not until() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert until(), "the jobs did not finish"
    finally:
        worker.stop()
        thread.join(timeout=30)


def test_retry_and_discard_are_a_tasks_own_words(app: brook.App) -> None:
    tries: list[int] = []

    @app.task(max_attempts=5, backoff={"min_ms": 10, "max_ms": 10})
    def flaky(n: int) -> int:
        tries.append(n)
        if len(tries) < 3:
            raise brook.Retry("not yet", delay_ms=20)
        return n * 10

    @app.task(max_attempts=5)
    def hopeless(n: int) -> None:
        raise brook.Discard(f"order {n} was cancelled")

    done, given_up = flaky.enqueue(4), hopeless.enqueue(5)
    _run(app, lambda: app.job(done).done and app.job(given_up).done)
    assert (app.job(done).state, app.job(done).attempts, app.job(done).result) == ("acked", 3, 40)
    dead = app.job(given_up)
    assert (dead.state, dead.attempts, dead.error) == ("dead", 1, "order 5 was cancelled")


def test_what_a_task_returns_is_kept_if_it_can_be(app: brook.App) -> None:
    @app.task
    def big() -> str:
        return "x" * 100_000

    @app.task
    def odd() -> object:
        return object()

    refs = [big.enqueue(), odd.enqueue()]
    _run(app, lambda: all(app.job(r).done for r in refs))
    assert [(app.job(r).state, app.job(r).result) for r in refs] == [("acked", None)] * 2


def test_references_and_bad_input(app: brook.App) -> None:
    @app.task(name="billing.charge")
    def charge(order: str, amount: int = 0) -> None: ...

    ref = charge.enqueue("o-1", amount=3, idempotency_key="order-1")
    assert charge.enqueue("o-1", amount=3, idempotency_key="order-1") == ref
    assert brook.JobRef.parse(str(ref)) == ref
    assert str(ref) == "tasks.billing.charge/0/0"
    assert app.job(str(ref)).state == "pending", "no worker opened the queue yet"
    app.claim_queue(charge.topic)
    assert app.job(str(ref)).state == "ready"
    with pytest.raises(BadRequest, match="JSON"):
        charge.enqueue(object())
    with pytest.raises(BadRequest, match="job reference"):
        app.job("nonsense")
    with pytest.raises(ValueError, match="two tasks"):
        app.task(charge.fn, name="billing.charge")
    with pytest.raises(ValueError, match="not a valid name"):
        app.task(lambda: None, name="no spaces")
    with pytest.raises(ValueError, match="cron= or every_ms="):
        app.periodic(lambda: None, name="p")
    assert app.job(brook.JobRef("tasks.nothing", 0, 0)).state == "unknown"


def test_the_settlers_settle_every_finished_job_at_once(app: brook.App) -> None:
    """Many jobs finishing on many threads, four settlers gathering batches: no finished
    job waits in the worker for the next one to finish (a settle held for a visibility
    timeout would let the job run again). Rounds until 2 s have passed: the race it
    guards against (a timed get that never returns) shows within a few hundred."""

    @app.task
    def noop() -> None:
        return None

    worker = Worker(app, concurrency=64)
    settled = [0]
    counting = threading.Lock()

    def settle(batch: list[Any]) -> None:
        with counting:
            settled[0] += len(batch)

    worker._settle = settle  # type: ignore[method-assign]
    worker.ledger.settled = lambda receipts: None  # type: ignore[method-assign,assignment,misc]
    stopping = threading.Event()

    def settle_loop() -> None:
        while not stopping.is_set():
            worker._settle_step()

    settlers = [threading.Thread(target=settle_loop, daemon=True) for _ in range(4)]
    for settler in settlers:
        settler.start()

    def finish(count: int) -> None:
        for n in range(count):
            worker._finished.put(types.SimpleNamespace(receipt=f"r{n}"))  # type: ignore[arg-type]
            if n % 7 == 0:
                time.sleep(0.0001)

    sent, rounds, until = 0, 0, time.monotonic() + 2.0
    try:
        while time.monotonic() < until:
            finishers = [threading.Thread(target=finish, args=(100,)) for _ in range(16)]
            for finisher in finishers:
                finisher.start()
            for finisher in finishers:
                finisher.join()
            sent += 1600
            rounds += 1
            deadline = time.monotonic() + slow(1.0)
            while settled[0] < sent and time.monotonic() < deadline:
                time.sleep(0.001)
            assert settled[0] == sent, f"round {rounds}: {sent - settled[0]} jobs left unsettled"
    finally:
        stopping.set()
        for _ in settlers:
            worker._finished.put(None)
        for settler in settlers:
            settler.join(timeout=5)


def _record(app: brook.App, ref: brook.JobRef) -> Any:
    return app.broker.topic(ref.topic).read(ref.partition, ref.offset, limit=1)[0]


# ------------------------------------------------------------------ options and parameters


@pytest.mark.parametrize("option", ["key", "priority", "delay_ms", "idempotency_key"])
def test_a_parameter_named_like_an_enqueue_option_is_refused_at_decoration(
    app: brook.App, option: str
) -> None:
    namespace: dict[str, Any] = {}
    exec(f"def shadowing(value, {option}=None): ...", namespace)
    with pytest.raises(ValueError, match=f"has a parameter named '{option}'.*options_only=True"):
        app.task(namespace["shadowing"])
    with pytest.raises(ValueError, match=r"takes \*\*fields"):

        @app.task
        def anything(**fields: Any) -> None: ...

    @app.task
    def positional_only(key: str, /) -> None: ...  # enqueue(key=...) cannot reach it

    assert "shadowing" not in app.tasks and "positional_only" in app.tasks


def test_options_only_passes_every_keyword_to_the_function(app: brook.App) -> None:
    cached: dict[str, str] = {}

    @app.task(options_only=True)
    def set_cache(key: str, value: str) -> str:
        cached[key] = value
        return key

    plain = set_cache.enqueue(key="user:7", value="x")
    record = _record(app, plain)
    assert record.key is None and "brook.priority" not in (record.headers or {})
    assert payload.decode_call(record.value).kwargs == {"key": "user:7", "value": "x"}
    given = set_cache.options(key="shard-1", priority=5, delay_ms=0).enqueue(
        key="user:8", value="y"
    )
    record = _record(app, given)
    assert (record.key, record.headers["brook.priority"]) == (b"shard-1", b"5")
    assert payload.decode_call(record.value).kwargs == {"key": "user:8", "value": "y"}
    _run(app, lambda: app.job(plain).done and app.job(given).done)
    assert [app.job(plain).result, app.job(given).result] == ["user:7", "user:8"]
    assert cached == {"user:7": "x", "user:8": "y"}


def test_the_options_form_and_the_shortcut_say_the_same(app: brook.App) -> None:
    @app.task
    def charge(order: str, amount: int = 0) -> None: ...

    short = _record(app, charge.enqueue("o-1", amount=3, key="c-7", priority=2, delay_ms=10))
    chained = charge.options(key="c-7").options(priority=2, delay_ms=10)
    long = _record(app, chained.enqueue("o-1", amount=3))
    assert (short.key, short.value) == (long.key, long.value) == (b"c-7", long.value)
    assert short.headers == long.headers
    assert repr(chained) == "<Task charge with key='c-7', priority=2, delay_ms=10>"
    many = charge.options(key="c-8").enqueue_many([(("o-2",), {}), (("o-3",), {"amount": 1})])
    assert [_record(app, ref).key for ref in many] == [b"c-8", b"c-8"]
    for bad in ({"priority": "high"}, {"delay_ms": -1}, {"key": 5}, {"idempotency_key": 7}):
        with pytest.raises(BadRequest):
            charge.options(**bad)
        with pytest.raises(BadRequest):
            charge.enqueue("o-4", **bad)
    with pytest.raises(BadRequest, match="names one job"):
        charge.options(idempotency_key="k").enqueue_many([(("o-5",), {})])
    with pytest.raises(TypeError, match="options\\(\\) takes"):
        chained.options(amount=3)


def test_a_call_the_function_cannot_take_is_refused_at_enqueue(app: brook.App) -> None:
    @app.task
    def charge(order: str, amount: int = 0) -> None: ...

    for args, kwargs, why in [
        ((), {"amount": 3}, "cannot take this call: missing a required argument: 'order'"),
        (("o-1",), {"amont": 3}, "has no parameter 'amont' \\(did you mean 'amount'\\?\\)"),
        ((), {"amont": 3}, "has no parameter 'amont'"),  # the misspelling said first
        (("o-1", 3, 4), {}, "cannot take this call: too many positional arguments"),
    ]:
        with pytest.raises(BadRequest, match=rf"task charge\(order, amount=0\) {why}"):
            charge.enqueue(*args, **kwargs)
        with pytest.raises(BadRequest, match=why):
            charge.enqueue_many([(("o-0",), {}), (args, kwargs)])
    with pytest.raises(brook.errors.TopicNotFound):  # nothing was appended
        app.broker.topic(charge.topic).end_offsets()


def test_isolation_is_declared_and_checked(app: brook.App) -> None:
    @app.task
    def threaded() -> None: ...

    @app.task(isolation="process", timeout_ms=1000)
    def isolated() -> None: ...

    assert (threaded.isolation, isolated.isolation) == ("thread", "process")
    with pytest.raises(ValueError, match='isolation must be "thread" or "process"'):
        app.task(lambda: None, name="forked", isolation="fork")


# ------------------------------------------------------------------ settings


def test_enqueueing_writes_no_settings_the_worker_claims_them(tmp_path: Path) -> None:
    """Defect 4: a declaration in a process that runs no worker changed the stored settings."""
    location = str(tmp_path / "data")
    with brook.App(location) as worker_app:

        @worker_app.task(name="charge", max_attempts=6, backoff={"min_ms": 50, "max_ms": 200})
        def charge(order: str) -> None: ...

        ref = charge.enqueue("o-1")
        worker_app.send_task("charge", ["o-2"])
        with pytest.raises(GroupNotFound):
            worker_app.broker.queue("tasks.charge", "tasks", create=False)
        queue, changed = worker_app.claim_queue("tasks.charge")
        backoff = {"min_ms": 50, "factor": 2.0, "max_ms": 200, "jitter": 0.5}
        assert changed == {"max_attempts": (None, 6), "backoff": (None, backoff)}
        assert queue.settings()["max_attempts"] == 6 and worker_app.job(ref).state == "ready"
        assert worker_app.claim_queue("tasks.charge")[1] == {}, "nothing differs: nothing written"
        assert worker_app.queue("tasks.charge") is worker_app.queue("tasks.charge")

    with brook.App(location) as producer:

        @producer.task(name="charge", max_attempts=2, backoff=brook.Backoff(50, 2.0, 200, 0.5))
        def charge_elsewhere(order: str) -> None: ...

        charge_elsewhere.enqueue("o-3")
        producer.send_task("charge", ["o-4"], priority=3)
        stored = producer.broker.queue("tasks.charge", "tasks", create=False).settings()
        assert stored["max_attempts"] == 6, "a producer's declaration wrote the worker's settings"
        assert producer.queue_settings("tasks.charge")["max_attempts"] == 2
        assert producer.claim_queue("tasks.charge")[1] == {"max_attempts": (6, 2)}


def test_none_keeps_and_zero_removes_a_stored_limit(app: brook.App) -> None:
    @app.task(concurrency_per_key=2, rate_limit_per_s=5)
    def limited() -> None: ...

    app.claim_queue(limited.topic)
    limited.settings.update(concurrency_per_key=None, rate_limit_per_s=5.0)
    assert app.claim_queue(limited.topic)[1] == {}, "None keeps; 5 and 5.0 are one rate"
    limited.settings.update(concurrency_per_key=0)
    assert app.claim_queue(limited.topic)[1] == {"concurrency_per_key": (2, None)}
    assert app.queue(limited.topic).settings()["concurrency_per_key"] is None
    assert app.claim_queue(limited.topic)[1] == {}, "0 (no limit) is what None stored means"


def test_tasks_sharing_a_queue_share_one_set_of_settings(app: brook.App) -> None:
    @app.task(queue="emails", max_attempts=3)
    def welcome(user: str) -> None: ...

    @app.task(queue="emails", max_attempts=3, backoff={"min_ms": 10})
    def invoice(user: str, amount: int = 0) -> None: ...

    @app.task(queue="emails", backoff=brook.Backoff(min_ms=10))  # the same backoff, spelled out
    def reminder(user: str) -> None: ...

    with pytest.raises(
        ValueError,
        match=r"tasks welcome and receipt share queue emails .* max_attempts=3 and max_attempts=4",
    ):

        @app.task(queue="emails", max_attempts=4)
        def receipt(user: str) -> None: ...

    assert app.queue_settings("emails") == {"max_attempts": 3, "backoff": brook.Backoff(min_ms=10)}
    assert app.queue_settings("tasks.nothing") == {}
    with pytest.raises(ValueError, match="task broken: max_attempts must be"):
        app.task(lambda: None, name="broken", max_attempts=0)


# ------------------------------------------------------------------ by name, idempotency


def test_send_task_enqueues_by_name_alone(app: brook.App) -> None:
    ref = app.send_task("refund", ["o-1"], {"amount": 5}, key="c-7", priority=2)
    record = _record(app, ref)
    assert (ref.topic, record.key, record.headers["brook.task"]) == (
        "tasks.refund",
        b"c-7",
        b"refund",
    )
    assert payload.decode_call(record.value) == payload.Call("refund", ["o-1"], {"amount": 5})
    assert app.send_task("refund", queue="payments").topic == "payments"
    assert app.job(ref).state == "pending", "no queue group was created"
    for bad, why in [
        ({"name": "no spaces"}, "not a task name"),
        ({"name": "refund", "args": "o-1"}, "list \\(or tuple\\)"),
        ({"name": "refund", "args": [b"o-1"]}, "args\\[0\\] is of type bytes"),
        ({"name": "refund", "kwargs": {"at": {1.5}}}, "kwargs\\['at'\\] is of type set"),
    ]:
        with pytest.raises(BadRequest, match=why):
            app.send_task(**bad)

    @app.task(queue="payments")
    def charge(order: str) -> None: ...

    assert app.send_task("charge", ["o-2"]).topic == "payments", "a declared task: its queue"
    with pytest.raises(BadRequest, match="missing a required argument"):
        app.send_task("charge")
    with pytest.raises(BadRequest, match="declared on queue payments"):
        app.send_task("charge", ["o-3"], queue="tasks.charge")


def test_an_idempotency_key_with_other_arguments_is_a_conflict(app: brook.App) -> None:
    @app.task
    def charge(order: str, amount: int = 0, note: str = "") -> None: ...

    first = charge.enqueue("o-1", amount=3, note="n", idempotency_key="order-1")
    assert charge.enqueue("o-1", note="n", amount=3, idempotency_key="order-1") == first
    assert (
        app.send_task("charge", ["o-1"], {"amount": 3, "note": "n"}, idempotency_key="order-1")
        == first
    )
    for other in [
        lambda: charge.enqueue("o-1", amount=4, note="n", idempotency_key="order-1"),
        lambda: charge.enqueue("o-1", amount=3.0, note="n", idempotency_key="order-1"),
        lambda: charge.enqueue("o-1", amount=3, note="n", key="c-1", idempotency_key="order-1"),
        lambda: app.send_task("charge", ["o-2"], idempotency_key="order-1"),
    ]:
        with pytest.raises(Conflict, match=f"'order-1' was already used for job {first}"):
            other()
    assert app.broker.topic(charge.topic).end_offsets() == {0: 1}, "nothing more was appended"


def test_remote_a_producer_changes_no_setting_and_conflicts_are_409(tmp_path: Path) -> None:
    served = Served(tmp_path / "data")
    url = f"http://127.0.0.1:{served.port}"
    worker_app, producer = brook.App(url), brook.App(url)
    try:

        @worker_app.task(name="charge", max_attempts=6)
        def charge(order: str) -> None: ...

        @producer.task(name="charge", max_attempts=2)
        def charge_elsewhere(order: str) -> None: ...

        assert worker_app.claim_queue("tasks.charge")[1] == {"max_attempts": (None, 6)}
        first = charge_elsewhere.enqueue("o-1", idempotency_key="k")
        assert producer.send_task("charge", ["o-1"], idempotency_key="k") == first
        with pytest.raises(Conflict) as conflict:
            producer.send_task("charge", ["o-2"], idempotency_key="k")
        assert conflict.value.status == 409
        assert worker_app.queue("tasks.charge").settings()["max_attempts"] == 6
        assert worker_app.job(first).state == "ready"
    finally:
        producer.close()
        worker_app.close()
        served.close()
