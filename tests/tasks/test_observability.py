"""What an operator sees of the task workers, through real `brook serve` and `brook
worker` processes: the worker's own Prometheus series (`--metrics-port`: run times and
outcomes per task, in flight, slots), its announcements on the dashboard's workers page
(the worker, the jobs it runs), and a job revoked from that page."""

from __future__ import annotations

import http.client
import re
import socket
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.tasks.conftest import Workers, free_port
from tests.waiting import slow, wait_for


def _two_free_ports() -> int:
    """A free port whose next one is free too."""
    while True:
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


def _series(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_worker_serves_its_series_per_task(workers: Workers) -> None:
    port = free_port()
    process = workers.start("--concurrency", "3", "--metrics-port", str(port))
    workers.started(process)
    app = workers.app
    done = [app.tasks["work"].enqueue(f"w{i}") for i in range(5)]
    failing = app.tasks["fails"].enqueue("f1")  # two attempts: a retry, then dead
    hanging = app.tasks["hangs"].enqueue("h1")  # one attempt, timed out: dead
    for ref in done:
        app.result(ref, timeout=slow(30))
    wait_for(lambda: app.job(failing).state == "dead" and app.job(hanging).state == "dead")

    def outcome(task: str, name: str) -> float:
        return _series(port).get(
            ("brook_task_outcomes_total", (("outcome", name), ("task", task))), 0
        )

    wait_for(lambda: outcome("hangs", "dead") == 1, what="the hung job's death counted")
    series = _series(port)
    assert outcome("work", "success") == 5
    assert (outcome("fails", "retry"), outcome("fails", "dead")) == (1, 1)
    assert (outcome("hangs", "timeout"), outcome("hangs", "success")) == (1, 0)
    assert series[("brook_task_run_seconds_count", (("task", "work"),))] == 5
    assert series[("brook_worker_slots", ())] == 3
    assert ("brook_task_in_flight", (("task", "serial"),)) in series


def test_the_workers_page_shows_each_worker_and_its_running_jobs(workers: Workers) -> None:
    process = workers.start("--concurrency", "2")
    workers.started(process)
    app = workers.app
    running = app.tasks["nap_async"].enqueue("shown", 60.0)
    workers.wait_for(lambda notes: any(n["event"] == "start" for n in notes))
    port = int(workers.url.rsplit(":", 1)[1])
    cookie = ""

    def page() -> str:
        nonlocal cookie
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/ui/workers", headers={"cookie": cookie} if cookie else {})
        answer = connection.getresponse()
        body = answer.read().decode()
        cookie = (answer.getheader("set-cookie") or "").split(";")[0] or cookie
        connection.close()
        assert answer.status == 200
        return body

    def revoke(fields: dict[str, str], status: int = 303) -> str:
        token = re.search(r'name="csrf" value="([^"]+)"', page())
        assert token is not None
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request(
            "POST",
            "/ui/workers/revoke",
            urllib.parse.urlencode({"csrf": token.group(1), **fields}),
            {"content-type": "application/x-www-form-urlencoded", "cookie": cookie},
        )
        answer = connection.getresponse()
        body = answer.read().decode()
        connection.close()
        assert answer.status == status, body
        return urllib.parse.unquote_plus(answer.getheader("location") or body)

    wait_for(lambda: f'data-job="{running}"' in page(), seconds=20, what="the running job")
    shown = page()
    assert f"pid {process.pid}" in shown and 'data-state="alive"' in shown
    assert "&#39;shown&#39;, 60.0" in shown

    waiting = app.tasks["nap_thread"].options(delay_ms=600_000).enqueue("later", 1.0)
    assert "will not run" in revoke({"ref": str(waiting)})
    status = app.job(waiting)
    assert status.state == "dead" and status.error.startswith("revoked from the dashboard")
    assert "its worker stops it" in revoke({"ref": str(running), "terminate": "yes"})
    wait_for(lambda: app.job(running).state == "dead", what="the running job stopped")
    assert "not revoked: it is dead" in revoke({"ref": str(running)})
    assert "is not a job reference" in revoke({"ref": "nonsense"}, status=400)
    assert "no task queue" in revoke({"ref": "elsewhere/0/0"}, status=404)
    process.terminate()
    process.wait(timeout=60)
    wait_for(lambda: 'data-state="stopped"' in page(), what="a drained worker saying so")


def test_each_process_serves_on_its_own_port_and_a_taken_port_is_one_line(
    workers: Workers,
) -> None:
    port = _two_free_ports()
    process = workers.start("--processes", "2", "--metrics-port", str(port))
    workers.started(process, count=2)
    for each in (port, port + 1):
        wait_for(lambda each=each: ("brook_worker_slots", ()) in _series(each), what=f":{each}")
    taken = workers.start("--metrics-port", str(port))
    assert taken.wait(timeout=60) == 1
    assert taken.stderr is not None
    said = taken.stderr.read()
    assert f"cannot serve metrics on 127.0.0.1:{port}" in said and "Traceback" not in said
