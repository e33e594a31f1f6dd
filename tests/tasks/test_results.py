"""Results you can wait on (`app.result`, `result_async`) and enqueueing from an event
loop (`enqueue_async`), embedded and against a real `brook serve`; and the long-poll
under them, `q.job(..., timeout=)` / `GET .../job?wait_ms=`, on the raw queue API."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.errors import BadRequest, NotFound
from tests.served import Served
from tests.tasks.conftest import Running
from tests.waiting import slow, wait_for


def _declare(app: brook.App) -> tuple[Any, Any]:
    @app.task(max_attempts=1)
    def total(order: str, amounts: list[int], seconds: float = 0.0) -> dict[str, Any]:
        time.sleep(seconds)
        if not amounts:
            raise ValueError(f"order {order} has no lines")
        return {"order": order, "total": sum(amounts)}

    @app.task
    def nothing() -> None:
        return None

    return total, nothing


def test_result_waits_for_the_ack_and_gives_what_the_task_returned(app: brook.App) -> None:
    total, nothing = _declare(app)
    slow_one = total.enqueue("o-1", [1, 2, 3], seconds=0.3)
    failing = total.enqueue("o-2", [])
    empty = nothing.enqueue()
    with pytest.raises(TimeoutError, match=r"o?did not finish within 0\.2 s \(it is pending\)"):
        app.result(slow_one, timeout=0.2)  # no worker has claimed the queue yet
    worker = Running(app)
    try:
        assert app.result(slow_one, timeout=slow(20)) == {"order": "o-1", "total": 6}
        assert app.job(slow_one).state == "acked"
        assert app.result(str(slow_one)) == {"order": "o-1", "total": 6}  # again, by its text
        with pytest.raises(brook.TaskFailed) as failed:
            app.result(failing, timeout=slow(20))
        assert failed.value.ref == failing
        assert "ValueError: order o-2 has no lines" in failed.value.error
        assert app.result(empty, timeout=slow(20)) is None
    finally:
        worker.stop()


def test_result_of_no_job_and_bad_timeouts_are_refused(app: brook.App) -> None:
    total, _ = _declare(app)
    ref = total.enqueue("o-1", [1])
    with pytest.raises(NotFound, match=r"no job tasks\.total/0/7"):
        app.result(brook.JobRef(ref.topic, 0, 7), timeout=1)
    with pytest.raises(NotFound):
        app.result("tasks.nowhere/0/0", timeout=1)
    with pytest.raises(BadRequest, match="timeout must be a number of seconds"):
        app.result(ref, timeout=-1)
    with pytest.raises(BadRequest, match="is not a job reference"):
        app.result("tasks.total/zero/0")


def test_a_long_result_wait_is_a_few_long_polls_not_a_loop(app: brook.App) -> None:
    """A job acked 1.5 s after `result` began waiting: answered at once after the ack,
    though the wait is one long-poll (a loop of looks would answer up to a pause late)."""
    total, _ = _declare(app)
    ref = total.enqueue("o-1", [4], seconds=1.5)
    worker = Running(app)
    try:
        assert app.result(ref, timeout=slow(20)) == {"order": "o-1", "total": 4}
        finished_ms = app.job(ref).finished_ms
        assert finished_ms is not None
        late_ms = time.time() * 1000 - finished_ms
        assert late_ms < slow(0.5) * 1000, f"answered {late_ms:.0f} ms after the ack"
    finally:
        worker.stop()


def test_enqueue_async_and_result_async_leave_the_event_loop_free(app: brook.App) -> None:
    total, _ = _declare(app)
    worker = Running(app)

    async def main() -> tuple[list[Any], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        beat = asyncio.create_task(ticker())
        first = await total.enqueue_async("o-1", [1, 1], seconds=0.3)
        keyed = await total.options(key="customer-7").enqueue_async("o-2", [2])
        many = await total.enqueue_many_async([(("o-3", [3]), {}), (("o-4", [4]), {})])
        refs = [first, keyed, *many]
        got = await asyncio.gather(*(app.result_async(r, timeout=slow(20)) for r in refs))
        beat.cancel()
        await app.aclose()
        return got, ticks

    try:
        got, ticks = asyncio.run(main())
    finally:
        worker.stop()
    assert [g["total"] for g in got] == [2, 2, 3, 4]
    assert ticks >= 10, "the event loop was blocked while waiting"


def test_enqueue_async_checks_what_enqueue_checks(app: brook.App) -> None:
    total, _ = _declare(app)

    async def main() -> None:
        with pytest.raises(BadRequest, match="has no parameter 'amount'"):
            await total.enqueue_async("o-1", amount=3)
        with pytest.raises(BadRequest, match="is of type set"):
            await total.enqueue_async("o-1", {1, 2})
        first = await total.enqueue_async("o-1", [1], idempotency_key="order-1")
        assert await total.enqueue_async("o-1", [1], idempotency_key="order-1") == first
        await app.aclose()

    asyncio.run(main())


# ---------------------------------------------------------------- the long-poll itself


@pytest.fixture(params=["embedded", "remote"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "remote":
        served = Served(tmp_path / "data")
        remote = brook.connect(f"http://127.0.0.1:{served.port}")
        yield remote
        remote.close()
        served.close()
    else:
        with brook.open(str(tmp_path / "data")) as embedded:
            yield embedded


def test_a_job_long_poll_answers_when_the_record_is_acked_or_dead(broker: Any) -> None:
    queue = broker.queue("work", "g", max_attempts=1)
    first = broker.topic("work").append(b"a")
    second = broker.topic("work").append(b"b")
    started = time.monotonic()
    assert queue.job(0, first.offset, timeout=0.3).state == "ready"
    assert 0.25 <= time.monotonic() - started < slow(5)
    jobs = queue.lease(max_records=2, timeout=slow(5))
    assert len(jobs) == 2

    def settle() -> None:
        time.sleep(0.3)
        queue.ack([jobs[0]], results=[b'"done"'])
        time.sleep(0.2)
        queue.nack([jobs[1]], reason="no")

    settler = threading.Thread(target=settle)
    settler.start()
    try:
        acked = queue.job(0, first.offset, timeout=slow(10))
        assert (acked.state, acked.result) == ("acked", b'"done"')
        dead = queue.job(0, second.offset, timeout=slow(10))
        assert (dead.state, dead.error) == ("dead", "no")
    finally:
        settler.join()
    assert queue.job(0, 99, timeout=slow(10)).state == "unknown"  # at once: no such record
    with pytest.raises(BadRequest, match="timeout must be a number of seconds"):
        queue.job(0, 0, timeout=-1)


def test_the_job_route_long_polls_with_wait_ms(tmp_path: Path) -> None:
    served = Served(tmp_path / "data")
    try:
        path = "/v1/topics/work/queues/g"
        assert served.request("PUT", path, {})[0] == 200
        assert (
            served.request("POST", "/v1/topics/work/records", {"records": [{"value": "a"}]})[0]
            == 200
        )
        started = time.monotonic()
        status, info = served.request("GET", f"{path}/job?partition=0&offset=0&wait_ms=300")
        assert (status, info["state"]) == (200, "ready")
        assert time.monotonic() - started >= 0.25
        status, leased = served.request("POST", f"{path}/lease", {"max_records": 1})
        receipt = leased["jobs"][0]["receipt"]
        threading.Timer(
            0.3, served.request, ("POST", f"{path}/ack", {"receipts": [receipt]})
        ).start()
        status, info = served.request("GET", f"{path}/job?partition=0&offset=0&wait_ms=10000")
        assert (status, info["state"]) == (200, "acked")
        status, error = served.request("GET", f"{path}/job?partition=0&offset=0&wait_ms=-5")
        assert status == 400 and "wait_ms" in error["error"]["message"]
    finally:
        served.close()


def test_an_eta_is_a_not_before_time_never_early(app: brook.App) -> None:
    @app.task
    def stamp() -> float:
        return time.time()

    eta = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=0.6)
    ref = stamp.options(eta=eta).enqueue()
    shortcut = stamp.enqueue(eta=eta.astimezone(datetime.timezone(datetime.timedelta(hours=5))))
    past = stamp.options(eta=eta - datetime.timedelta(days=1)).enqueue()
    worker = Running(app)
    try:
        wait_for(lambda: app.job(ref).state != "pending", 20)  # the worker claimed the queue
        status = app.job(ref)
        assert status.state == "delayed" and status.due_ms == int(eta.timestamp() * 1000)
        for job in (ref, shortcut):
            assert app.result(job, timeout=slow(20)) >= eta.timestamp()
        assert app.result(past, timeout=slow(20)) < eta.timestamp()
    finally:
        worker.stop()
    with pytest.raises(BadRequest, match="eta must be timezone-aware"):
        stamp.options(eta=datetime.datetime.now())
    with pytest.raises(BadRequest, match="eta must be a datetime, not int"):
        stamp.options(eta=1_800_000_000)  # type: ignore[arg-type]


def test_revoke_stops_a_waiting_job_and_leaves_a_finished_one(app: brook.App) -> None:
    ran: list[str] = []

    @app.task
    def send(email: str) -> str:
        ran.append(email)
        return email

    later = send.options(delay_ms=3_600_000).enqueue("later")
    keyed = [send.options(key="customer-7").enqueue(f"c7-{n}") for n in range(2)]
    other = send.options(key="customer-8").enqueue("c8")
    # Before any worker claimed the queue: revoking opens its group (with the defaults
    # a worker's claim then replaces).
    assert app.revoke(later) is True
    assert app.revoke(str(later)) is False  # dead already: nothing more to stop
    assert app.revoke_key(send, "customer-7") == 2
    assert app.revoke_key("send", b"customer-7") == 0
    worker = Running(app)
    try:
        assert app.result(other, timeout=slow(20)) == "c8"
        for ref in (later, *keyed):
            with pytest.raises(brook.TaskFailed, match="revoked"):
                app.result(ref, timeout=slow(5))
        assert app.revoke(other) is False  # it ran
    finally:
        worker.stop()
    assert ran == ["c8"]
    with pytest.raises(BadRequest, match="is not a task name"):
        app.revoke_key("no such/task", "k")


def test_many_waiters_at_once_are_each_answered_when_their_job_is(app: brook.App) -> None:
    """A web app's shape: dozens of requests each waiting on its own job at once (one
    client, its connection pool shared), answered as their jobs finish, none left out."""
    total, _ = _declare(app)
    refs = [total.enqueue(f"o-{i}", [i, 1], seconds=0.01) for i in range(60)]
    got: dict[int, Any] = {}
    lock = threading.Lock()

    def wait(i: int) -> None:
        value = app.result(refs[i], timeout=slow(60))
        with lock:
            got[i] = value

    waiters = [threading.Thread(target=wait, args=(i,)) for i in range(len(refs))]
    for waiter in waiters:
        waiter.start()
    worker = Running(app)
    try:
        for waiter in waiters:
            waiter.join(timeout=slow(90))
    finally:
        worker.stop()
    assert got == {i: {"order": f"o-{i}", "total": i + 1} for i in range(len(refs))}
