"""Unique jobs (`@app.task(unique=True | unique_by=...)`) and debounce
(`debounce_ms=`), embedded and against a real `brook serve`: one live job per
identity however many producers race, a new one once it finished, the index rebuilt
after a restart, only the last of a burst run; and the raw queue operation under them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.errors import BadRequest
from tests.tasks.conftest import Running
from tests.waiting import slow, wait_for


def test_a_unique_job_is_enqueued_once_while_it_lives(app: brook.App) -> None:
    ran: list[Any] = []

    @app.task(unique=True)
    def report(customer: str, month: str = "jan") -> str:
        ran.append((customer, month))
        return customer

    first = report.options(delay_ms=600_000).enqueue("c1")
    again = report.enqueue("c1", month="jan")  # the same call, spelt otherwise
    other = report.enqueue("c1", "feb")
    assert again == first and again.existing and not first.existing
    assert other != first and not other.existing
    assert app.revoke(first)  # finished (dead): its identity is free again
    fresh = report.enqueue("c1")
    assert fresh != first and not fresh.existing
    with Running(app, concurrency=2):
        assert app.result(fresh, timeout=slow(30)) == "c1"
        assert report.enqueue("c1") not in (first, fresh), "acked: a new job"


def test_unique_by_names_or_a_function(app: brook.App) -> None:
    @app.task(unique_by=("customer",))
    def sync(customer: str, page: int) -> None:
        pass

    @app.task(unique_by=lambda order, **_: order.split("-")[0])
    def ship(order: str, fast: bool = False) -> None:
        pass

    assert sync.enqueue("c1", 1) == sync.enqueue("c1", 2) != sync.enqueue("c2", 1)
    assert ship.enqueue("a-1") == ship.enqueue("a-2", fast=True) != ship.enqueue("b-1")
    with pytest.raises(ValueError, match="not one of its parameters"):

        @app.task(unique_by=("nope",))
        def broken(customer: str) -> None:
            pass

    with pytest.raises(BadRequest, match="give no idempotency_key"):
        sync.options(idempotency_key="k").enqueue("c9", 1)
    with pytest.raises(BadRequest, match="debounce_ms or idempotency_key"):
        sync.options(idempotency_key="k", debounce_ms=10)


def test_racing_producers_get_one_job(app: brook.App) -> None:
    @app.task(unique=True)
    def rebuild(index: str) -> None:
        pass

    refs: list[brook.JobRef] = []
    lock = threading.Lock()

    def enqueue() -> None:
        ref = rebuild.enqueue("products")
        with lock:
            refs.append(ref)

    threads = [threading.Thread(target=enqueue) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(refs)) == 1 and sum(not r.existing for r in refs) == 1
    topic = app.broker.topic(rebuild.topic)
    assert sum(topic.end_offsets().values()) == 1


def test_debounce_runs_only_the_last_of_a_burst(app: brook.App) -> None:
    seen: list[int] = []

    @app.task
    def reindex(user: str, version: int) -> None:
        seen.append(version)

    @app.task(unique_by=("user",))
    def notify(user: str, version: int) -> None:
        seen.append(-version)

    burst = [reindex.options(key="u1", debounce_ms=300).enqueue("u1", v) for v in range(4)]
    keyed = [notify.options(debounce_ms=300).enqueue("u1", v) for v in range(3)]
    for ref in burst[:-1] + keyed[:-1]:
        status = app.job(ref)
        assert status.state == "dead" and status.error.startswith("debounced")
    with Running(app, concurrency=2):
        app.result(burst[-1], timeout=slow(30))
        app.result(keyed[-1], timeout=slow(30))
    assert sorted(seen) == [-2, 3], "only the last of each burst ran"
    lone = [reindex.options(debounce_ms=50).enqueue("u2", v) for v in (7, 7, 8)]
    assert app.job(lone[0]).state == "dead" and app.job(lone[2]).state == "delayed", (
        "no key: a burst of the same call"
    )


def test_the_identity_index_is_read_back_after_a_restart(tmp_path: Path) -> None:
    app = brook.App(str(tmp_path / "d"))

    @app.task(unique=True)
    def export(table: str) -> None:
        pass

    first = export.options(delay_ms=600_000).enqueue("orders")
    app.close()
    app = brook.App(str(tmp_path / "d"))
    export = app.task(unique=True)(export.fn)
    again = export.enqueue("orders")
    assert again == first and again.existing
    app.close()


def test_the_raw_operation_refuses_a_bad_identity(app: brook.App) -> None:
    q = app.broker.queue("raw", "g")
    made = q.enqueue_unique("job-1", b"v")
    assert (made.existing, q.enqueue_unique("job-1", b"w").existing) == (False, True)
    assert q.enqueue_unique("job-1", b"x", replace=True).replaced == [(made.partition, made.offset)]
    for bad in ("", "x" * 257):
        with pytest.raises(BadRequest, match="identity"):
            q.enqueue_unique(bad, b"v")
    wait_for(lambda: q.job(made.partition, made.offset).state == "dead", what="replaced: dead")
