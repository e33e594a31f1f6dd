"""The canvas (`task.s`, `brook.chain`, `group`, `chord`) as users write it, embedded
and against a real `brook serve`, run by a real worker: results passed as Celery
passes them, each join counted in the broker, failures ending the canvas's reference
dead with the job that failed, `on_error` run once; and bad canvases refused."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import brook
from brook.errors import BadRequest
from tests.tasks.conftest import Running
from tests.waiting import slow, wait_for


class Tasks:
    def __init__(self, app: brook.App) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.lock = threading.Lock()
        calls, lock = self.calls, self.lock

        def note(name: str, *args: Any) -> None:
            with lock:
                calls.append((name, args))

        @app.task(max_attempts=1)
        def add(x: int, y: int) -> int:
            note("add", x, y)
            return x + y

        @app.task(max_attempts=1)
        def total(values: list[Any], extra: int = 0) -> int:
            note("total", values, extra)
            return sum(v for v in values if isinstance(v, int)) + extra

        @app.task(max_attempts=1)
        def described(values: list[Any]) -> list[str]:
            note("described", values)
            return [type(v).__name__ for v in values]

        @app.task(max_attempts=1)
        def fail(x: int) -> int:
            note("fail", x)
            raise ValueError(f"no {x}")

        @app.task(max_attempts=1)
        def hello() -> str:
            note("hello")
            return "hello"

        @app.task(max_attempts=1)
        def errback(ref: str, error: str, tag: str) -> str:
            note("errback", ref, error, tag)
            return tag

        self.add, self.total, self.described, self.fail = add, total, described, fail
        self.hello, self.errback = hello, errback

    def called(self, name: str) -> list[tuple[Any, ...]]:
        with self.lock:
            return [args for n, args in self.calls if n == name]


def test_a_chain_passes_each_result_to_the_next_link(app: brook.App) -> None:
    t = Tasks(app)
    ref = brook.chain(t.add.s(1, 2), t.add.s(10), t.add.s(100)).enqueue()
    assert ref.join is not None and brook.JobRef.parse(str(ref)) == ref
    assert app.job(ref).state == "waiting"
    piped = (t.add.s(2, 2) | t.hello.si() | t.described.s()).enqueue()
    with Running(app):
        assert app.result(ref, timeout=slow(30)) == 113
        assert app.result(piped, timeout=slow(30)) == ["str", "str", "str", "str", "str"]
        assert app.job(ref).state == "acked" and app.job(ref).result == 113
    assert sorted(t.called("add")) == [(1, 2), (2, 2), (3, 10), (13, 100)]
    assert t.called("hello") == [()], "si() takes no result"


def test_a_chord_runs_its_callback_once_with_every_result_in_order(app: brook.App) -> None:
    t = Tasks(app)
    members = [t.add.s(i, i) for i in range(30)]
    ref = brook.chord(brook.group(members), t.total.s(extra=1)).enqueue()
    grouped = brook.group(t.add.s(i, 1) for i in range(5)).enqueue()
    assert len(grouped) == 5 and all(r.join is None for r in grouped.refs)
    with Running(app):
        assert app.result(ref, timeout=slow(30)) == sum(2 * i for i in range(30)) + 1
        assert app.result(grouped, timeout=slow(30)) == [1, 2, 3, 4, 5]
    assert t.called("total") == [([2 * i for i in range(30)], 1)]


def test_a_dead_link_ends_the_chain_dead_and_runs_on_error_once(app: brook.App) -> None:
    t = Tasks(app)
    ref = brook.chain(
        t.add.s(1, 1), t.fail.s(), t.add.s(5), on_error=t.errback.s("cleanup")
    ).enqueue()
    last = brook.chain(t.add.s(1, 1), t.fail.s(), on_error=t.errback.s("at the end")).enqueue()
    with Running(app):
        with pytest.raises(brook.TaskFailed) as failed:
            app.result(ref, timeout=slow(30))
        assert failed.value.error.startswith("ValueError: no 2")
        assert failed.value.failed.startswith("tasks.fail/0/")
        assert app.job(ref).state == "dead"
        with pytest.raises(brook.TaskFailed):
            app.result(last, timeout=slow(30))
        wait_for(lambda: len(t.called("errback")) == 2, what="both errbacks")
    assert t.called("add") == [(1, 1), (1, 1)], "the link after the dead one never ran"
    tags = sorted(args[2] for args in t.called("errback"))
    assert tags == ["at the end", "cleanup"]
    for failed_ref, error, _ in t.called("errback"):
        assert failed_ref.startswith("tasks.fail/0/") and error.startswith("ValueError: no 2")


def test_a_dead_member_stops_a_chord_unless_failures_are_allowed(app: brook.App) -> None:
    t = Tasks(app)
    stopped = brook.chord([t.add.s(1, 1), t.fail.s(7)], t.total.s()).enqueue()
    allowed = brook.chord([t.add.s(2, 2), t.fail.s(8)], t.described.s(), allow_failures=True)
    allowed_ref = allowed.enqueue()
    with Running(app):
        with pytest.raises(brook.TaskFailed, match="no 7"):
            app.result(stopped, timeout=slow(30))
        assert app.result(allowed_ref, timeout=slow(30)) == ["int", "TaskFailed"]
    assert t.called("total") == []


def test_result_async_waits_for_a_canvas(app: brook.App) -> None:
    t = Tasks(app)

    async def main() -> Any:
        ref = brook.chain(t.add.s(1, 2), t.add.s(3)).enqueue()
        try:
            return await app.result_async(ref, timeout=slow(30))
        finally:
            await app.aclose()

    with Running(app):
        assert asyncio.run(main()) == 6


def test_signatures_carry_options_and_travel_as_json(app: brook.App) -> None:
    t = Tasks(app)
    sig = t.add.s(1, 2).options(key="customer-7", priority=5)
    again = app.signature_from(sig.to_dict())
    assert again == sig and again.opts.key == "customer-7"
    by_name = app.signature("add", 4, 5)
    assert by_name.topic == t.add.topic and repr(by_name) == "add.s(4, 5)"
    with Running(app):
        assert app.result(by_name.enqueue(), timeout=slow(30)) == 9
        assert app.result(sig.enqueue(), timeout=slow(30)) == 3


def test_a_group_is_revoked_job_by_job(app: brook.App) -> None:
    t = Tasks(app)
    later = [t.add.s(i, i).options(delay_ms=600_000) for i in range(3)]
    grouped = brook.group(later).enqueue()
    assert app.revoke(grouped) is True
    assert [app.job(r).state for r in grouped] == ["dead"] * 3
    assert app.revoke(grouped) is False, "dead already"


def test_bad_canvases_are_refused_before_anything_is_enqueued(app: brook.App) -> None:
    t = Tasks(app)
    with pytest.raises(BadRequest, match="at least one"):
        brook.chain()
    with pytest.raises(BadRequest, match="at least one"):
        brook.group()
    with pytest.raises(BadRequest, match="not int"):
        brook.chain(t.add.s(1, 2), 5)  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match="a group in a group"):
        brook.group(brook.group(t.add.s(1, 1)), t.add.s(1, 2))
    with pytest.raises(BadRequest, match="cannot take this call"):
        brook.chain(t.add.s(1, 2), t.add.s(1, 2)).enqueue()  # the second gets 3 arguments
    with pytest.raises(BadRequest, match="cannot take this call"):
        brook.chain(t.add.s(1), t.hello.si()).enqueue()
    with pytest.raises(BadRequest, match="unknown enqueue option"):
        t.add.s(1, 2).options(queue="elsewhere")
    for garbage in (
        "tasks.add/after/",
        "tasks.add/0/²",
        "tasks.add/\u0660/\u0663",  # Arabic-Indic digits
        "t/0/007",
        f"t/0/{2**63}",
    ):
        with pytest.raises(BadRequest, match="not a job reference"):
            app.result(garbage)
    assert app.job(brook.JobRef(t.add.topic, 0, 0)).state == "unknown", "nothing was enqueued"


def test_in_testing_mode_a_chord_runs_end_to_end(app: brook.App) -> None:
    t = Tasks(app)
    with app.testing() as testing:
        ref = brook.chord([t.add.s(i, 1) for i in range(10)], t.total.s()).enqueue()
        testing.drain()
        assert app.result(ref, timeout=1) == sum(range(1, 11))
