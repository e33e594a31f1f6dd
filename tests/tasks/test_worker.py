"""The task layer as its users run it: `brook worker` processes against `brook serve`,
killed, drained, racing each other (SPEC §9)."""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections import Counter

from tests.tasks.conftest import Workers
from tests.waiting import slow


def ends(notes: list[dict[str, object]]) -> Counter[object]:
    return Counter(n["job"] for n in notes if n.get("event") == "end")


def test_a_job_runs_and_tells_its_result_and_errors(workers: Workers) -> None:
    app = workers.app
    ref = app.tasks["work"].enqueue("a")
    failing = app.tasks["fails"].enqueue("b")
    doubled = app.tasks["doubled"].enqueue("c", x=21)
    assert app.job(ref).state == "pending", "no worker opened its queue yet: enqueue only appends"
    assert app.tasks["work"]("direct") == {"job": "direct"}, "calling a task just calls it"
    workers.start("--concurrency", "4")
    workers.wait_for(lambda notes: ends(notes)["a"] and ends(notes)["b"] == 2 and ends(notes)["c"])
    deadline = time.monotonic() + slow(10)
    while not all(app.job(r).done for r in (ref, failing, doubled)) and time.monotonic() < deadline:
        time.sleep(0.05)
    done, dead, async_done = app.job(ref), app.job(failing), app.job(doubled)
    assert (done.state, done.attempts, done.result) == ("acked", 1, {"job": "a"})
    assert (dead.state, dead.attempts) == ("dead", 2)
    assert dead.error.startswith("ValueError: no customer b")
    assert (async_done.state, async_done.result) == ("acked", 42), "an async def task"


def test_sigterm_drains_what_the_worker_holds_and_no_job_runs_twice(workers: Workers) -> None:
    work = workers.app.tasks["work"]
    work.enqueue_many([((f"j{n}",), {"seconds": 0.1}) for n in range(24)])
    first = workers.start("--concurrency", "4")
    workers.wait_for(lambda notes: len(ends(notes)) >= 4)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=30) == 0, "a drained worker exits 0"
    started = {n["job"] for n in workers.notes() if n["event"] == "start"}
    assert started <= set(ends(workers.notes())), "SIGTERM let every held job finish"
    workers.start("--concurrency", "8")
    notes = workers.wait_for(lambda notes: len(ends(notes)) == 24)
    assert all(count == 1 for count in ends(notes).values()), "a job ran twice"


def test_every_job_of_a_killed_worker_runs_at_least_once(workers: Workers) -> None:
    work = workers.app.tasks["work"]
    refs = work.enqueue_many([((f"k{n}",), {"seconds": 0.1}) for n in range(16)])
    # Short leases, so that what the killed worker held comes back soon.
    workers.app.broker.queue(work.topic, "tasks", visibility_timeout_ms=1_500)
    doomed = workers.start("--concurrency", "4")
    workers.wait_for(lambda notes: len(ends(notes)) >= 3)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait()
    workers.start("--concurrency", "4")
    notes = workers.wait_for(lambda notes: len(ends(notes)) == 16, timeout=60)
    assert set(ends(notes)) == {f"k{n}" for n in range(16)}
    deadline = time.monotonic() + slow(10)
    while time.monotonic() < deadline and not all(workers.app.job(r).done for r in refs):
        time.sleep(0.1)
    assert {workers.app.job(r).state for r in refs} == {"acked"}


def test_same_key_jobs_never_overlap_across_workers(workers: Workers) -> None:
    serial = workers.app.tasks["serial"]
    # Both serve before the first job: on a busy machine one started after the jobs
    # were enqueued found them all taken (each runs in 50 ms).
    for process in [workers.start("--concurrency", "8") for _ in range(2)]:
        workers.started(process)
    for n in range(30):
        customer = f"customer-{n % 3}"
        serial.enqueue(f"s{n}", customer, key=customer, seconds=0.05)
    notes = workers.wait_for(lambda notes: len(ends(notes)) == 30, timeout=60)
    by_key: dict[str, list[tuple[float, float]]] = {}
    for note in notes:
        by_key.setdefault(str(note["key"]), []).append((float(note["started"]), float(note["at"])))
    for key, spans in by_key.items():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end, f"two jobs of {key} overlapped"
    assert len({n["pid"] for n in notes}) == 2, "both workers took jobs"


def test_priorities_overtake_and_delays_hold_jobs_back(workers: Workers) -> None:
    work = workers.app.tasks["work"]
    for n in range(20):
        work.enqueue(f"low{n}", seconds=0.05)
    work.enqueue("urgent", priority=10)
    enqueued = time.time()
    work.enqueue("later", delay_ms=1_500)
    workers.start("--concurrency", "1")
    notes = workers.wait_for(lambda notes: "later" in ends(notes), timeout=30)
    order = [n["job"] for n in notes if n["event"] == "start"]
    assert order.index("urgent") <= 1, "the urgent job waited behind queued work"
    later = next(n for n in notes if n["job"] == "later" and n["event"] == "start")
    assert later["at"] >= enqueued + 1.5, "a delayed job ran early"


def test_a_job_that_outlives_its_visibility_timeout_runs_once(workers: Workers) -> None:
    workers.app.tasks["long"].enqueue("slow", seconds=2.5)  # 2.5 visibility timeouts
    workers.start("--concurrency", "2")
    workers.start("--concurrency", "2")
    notes = workers.wait_for(lambda notes: ends(notes)["slow"] == 1)
    # Unextended, its lease would have ended 1.5 s before it did, and the other worker
    # would have started it again by now.
    time.sleep(0.5)
    notes = workers.notes()
    starts = Counter(n["job"] for n in notes if n.get("event") == "start")
    assert (starts["slow"], ends(notes)["slow"]) == (1, 1)


def test_a_sync_task_past_its_timeout_fails_its_attempt(workers: Workers) -> None:
    ref = workers.app.tasks["hangs"].enqueue("h")
    workers.start()
    deadline = time.monotonic() + slow(10)
    while time.monotonic() < deadline and not workers.app.job(ref).done:
        time.sleep(0.05)
    status = workers.app.job(ref)
    assert status.state == "dead" and status.error.startswith("TimeoutError")


def test_a_periodic_job_runs_once_per_slot_with_two_workers_and_a_broker_restart(
    workers: Workers,
) -> None:
    workers.start(app="beats_app:app")
    workers.start(app="beats_app:app")
    workers.wait_for(lambda notes: len(notes) >= 2)
    workers.restart_broker()  # kill -9: the workers ride it out and carry on
    workers.wait_for(lambda notes: len(notes) >= 5, timeout=30)
    workers.app.broker.pause_schedule("task.beat")  # no slot is enqueued after this
    schedule = workers.app.broker.get_schedule("task.beat")
    records = workers.app.broker.topic("tasks.beat").read(0, 0, 1_000)
    workers.wait_for(lambda notes: len(notes) >= len(records))  # the last slots' jobs run
    time.sleep(0.3)
    runs = workers.notes()
    slots = [int(r.headers["brook.slot_ms"]) for r in records]
    assert len(slots) == len(set(slots)), "a slot was enqueued twice"
    assert len(runs) == len(records) == schedule.fired, "a slot's job ran twice, or not at all"
    assert len({n["pid"] for n in runs}) <= 2


def test_processes_share_the_work_and_all_drain_on_sigterm(workers: Workers) -> None:
    work = workers.app.tasks["work"]
    parent = workers.start("--processes", "2", "--concurrency", "2")
    # Both up before the jobs come (on a busy machine one could run all 40 before the
    # other has started).
    workers.started(parent, count=2)
    work.enqueue_many([((f"p{n}",), {"seconds": 0.05}) for n in range(40)])
    notes = workers.wait_for(lambda notes: len(ends(notes)) == 40)
    assert len({n["pid"] for n in notes}) == 2, "both processes ran jobs"
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=30) == 0
    for pid in {int(str(n["pid"])) for n in notes}:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"worker process {pid} outlived its parent")
