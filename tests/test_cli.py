"""The command line, run as users run it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from brook.cli import main


def run(*args: str, stdin: str = "") -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    return result.exit_code, result.output


def test_produce_consume_and_topics(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    assert run("topics", "create", "demo", "--partitions", "2", "--data", data)[0] == 0
    code, out = run("produce", "demo", "--data", data, "--key", "k", stdin="one\ntwo\nthree\n")
    assert code == 0
    code, out = run("consume", "demo", "--group", "g", "--data", data)
    assert (code, out.split()) == (0, ["one", "two", "three"])
    assert run("consume", "demo", "--group", "g", "--data", data)[1] == "", (
        "the group's position was committed"
    )
    assert run("consume", "demo", "--from-beginning", "-n", "2", "--data", data)[1].split() == [
        "one",
        "two",
    ]
    code, out = run("produce", "demo", "four", "--data", data)
    assert code == 0 and "offset=" in out
    code, out = run("topics", "list", "--data", data)
    assert "demo\tpartitions=2\trecords=4" in out
    assert run("topics", "delete", "demo", "--data", data)[0] == 0
    assert run("topics", "list", "--data", data)[1] == ""


def test_errors_are_one_clear_line(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    code, out = run("topics", "describe", "missing", "--data", data)
    assert code == 1 and "no Brook data at" in out and "Traceback" not in out
    assert run("topics", "create", "other", "--data", data)[0] == 0
    code, out = run("topics", "describe", "missing", "--data", data)
    assert code == 1 and "topic_not_found" in out and "Traceback" not in out
    code, out = run("topics", "create", "bad name", "--data", data)
    assert code == 1 and "invalid_name" in out


def test_queue_commands(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    assert run("produce", "jobs", "--data", data, stdin="one\ntwo\nthree\n")[0] == 0
    code, out = run("queue", "stats", "jobs", "workers", "--data", data)
    assert code == 1 and "not_found" in out, "looking at a group does not create it"
    import brook

    with brook.open(data) as b:
        b.queue("jobs", "workers")
    code, out = run("queue", "stats", "jobs", "workers", "--data", data)
    assert code == 0 and "ready: 3" in out and "setting max_attempts: 5" in out
    code, out = run("queue", "lease", "jobs", "workers", "-n", "1", "--ack", "--data", data)
    first = out.splitlines()[0]
    assert code == 0 and first.startswith("0\t0\tattempt=1\t") and first.endswith("\tone")

    with brook.open(data) as b:
        q = b.queue("jobs", "workers")
        q.discard(q.lease(max_records=1), reason="bad input")
    code, out = run("queue", "dead", "jobs", "workers", "--data", data)
    assert code == 0 and out == "0/1\tattempts=1\terror='bad input'\ttwo\n"
    code, out = run("queue", "stats", "jobs", "workers", "--data", data)
    assert "acked: 1" in out and "dead: 1" in out and "ready: 1" in out
    assert run("queue", "redrive", "jobs", "workers", "--data", data)[1] == "redriven 1\n"
    assert run("queue", "redrive", "jobs", "workers", "--data", data)[1] == "redriven 0\n"
    code, out = run("queue", "lease", "jobs", "workers", "-n", "5", "--data", data)
    assert sorted(line.split("\t")[-1] for line in out.splitlines()) == ["three", "two"]
    code, out = run("queue", "lease", "jobs", "bad/group", "--data", data)
    assert code == 1 and "invalid_name" in out and "Traceback" not in out


def test_timer_commands(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    code, out = run(
        "timers",
        "schedule",
        "reminders",
        "hello",
        "--delay-ms",
        "3600000",
        "--id",
        "t1",
        "--data",
        data,
    )
    assert (code, out) == (0, "t1\n")
    code, out = run("timers", "show", "t1", "--data", data)
    assert code == 0 and "state: pending" in out and "topic: reminders" in out
    assert run("timers", "cancel", "t1", "--data", data) == (0, "cancelled t1\n")
    code, out = run("timers", "cancel", "t1", "--data", data)
    assert code == 1 and "not pending" in out and "Traceback" not in out
    code, out = run(
        "timers", "schedule", "reminders", "past", "--at", "2020-01-01T00:00:00Z", "--data", data
    )
    assert code == 0
    timer_id = out.strip()
    import brook

    with brook.open(data) as b:
        deadline = time.monotonic() + 10
        while b.timer(timer_id).state != "fired":  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            time.sleep(0.01)
    code, out = run("timers", "show", timer_id, "--data", data)
    assert "state: fired" in out and "offset: 0" in out and "due: 2020-01-01T00:00:00+00:00" in out
    code, out = run("timers", "schedule", "reminders", "x", "--at", "next tuesday", "--data", data)
    assert code == 2 and "--at" in out
    code, out = run("timers", "show", "nope", "--data", data)
    assert code == 1 and "not known" in out


def test_serve_refuses_a_bad_option_in_one_line(tmp_path: Path) -> None:
    code, out = run("serve", "--data", str(tmp_path / "d"), "--linger-ms", "-1")
    assert code == 2 and "--linger-ms" in out and "Traceback" not in out
    assert not (tmp_path / "d").exists(), "nothing was opened"


def test_serve_holds_the_lock_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    data = tmp_path / "d"
    env = {**os.environ, "BROOK_DATA": str(data)}
    server = subprocess.Popen(
        [sys.executable, "-m", "brook.cli", "serve", "--port", "0", "--linger-ms", "0"],
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert server.stderr is not None
        for line in server.stderr:
            if "ready" in line:
                break
        code, out = run("produce", "t", "x", "--data", str(data))
        assert code == 1 and "in use by another broker" in out and "--url" in out
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    finally:
        server.kill()
        server.wait()
        if server.stderr is not None:
            server.stderr.close()


def test_commands_that_only_read_work_beside_a_running_server(tmp_path: Path) -> None:
    from tests.served import Served

    data = tmp_path / "d"
    server = Served(data, "--linger-ms", "0", measured=True)
    try:
        for i in range(3):
            assert server.request("POST", "/v1/topics/t/records", b"r%d" % i)[0] == 200
        server.request("POST", "/v1/topics/t/groups/g/commit", {"offsets": {"0": 1}})
        code, out = run("topics", "list", "--data", str(data))
        assert (code, out) == (0, "t\tpartitions=1\trecords=3\n")
        code, out = run("consume", "t", "--from-beginning", "--data", str(data))
        assert (code, out.split()) == (0, ["r0", "r1", "r2"])
        code, out = run("topics", "describe", "t", "--data", str(data))
        assert code == 0 and "partitions" in out
        code, out = run("consume", "t", "--group", "g", "--data", str(data))
        assert code == 1 and "in use by another broker" in out, "a group consumer commits"
        # The server was not disturbed: it still appends and serves.
        assert server.request("POST", "/v1/topics/t/records", b"r3")[0] == 200
        assert server.stop() == 0
    finally:
        server.close()


def test_the_commands_talk_to_a_running_server_with_url(tmp_path: Path) -> None:
    from brook.config import hash_key
    from tests.served import Served

    config = tmp_path / "brook.toml"
    config.write_text(
        f'[[auth.keys]]\nname = "cli"\nsha256 = "{hash_key("cli-key")}"\nscopes = ["admin", "produce", "consume"]\n'
    )
    server = Served(tmp_path / "data", config=config)
    try:
        url = f"http://127.0.0.1:{server.port}"
        env = {"BROOK_API_KEY": "cli-key"}
        runner = CliRunner(env=env)

        def remote(*args: str, stdin: str = "") -> tuple[int, str]:
            result = runner.invoke(main, [*args, "--url", url], input=stdin)
            return result.exit_code, result.output

        assert remote("topics", "create", "jobs", "--partitions", "2")[0] == 0
        assert remote("produce", "jobs", "--key", "k", stdin="a\nb\n")[0] == 0
        assert remote("produce", "jobs", "c", "--key", "k")[0] == 0
        code, out = remote("consume", "jobs", "--group", "g")
        assert (code, out.split()) == (0, ["a", "b", "c"])
        assert remote("consume", "jobs", "--group", "g")[1] == "", (
            "the group's position was committed on the server"
        )
        assert remote("consume", "jobs", "--from-beginning", "-n", "2")[1].split() == ["a", "b"]
        code, out = remote("topics", "describe", "jobs")
        assert code == 0 and "next offset 3" in out
        assert "jobs\tpartitions=2\trecords=3" in remote("topics", "list")[1]
        denied = CliRunner().invoke(main, ["topics", "list", "--url", url])
        assert (
            denied.exit_code == 1
            and "unauthorized" in denied.output
            and "Traceback" not in denied.output
        )
        code, out = remote("queue", "lease", "jobs", "w", "-n", "5", "--ack")
        assert code == 0 and len([line for line in out.splitlines() if "attempt=1" in line]) == 3
        code, out = remote("queue", "stats", "jobs", "w")
        assert code == 0 and "acked: 3" in out
        assert remote("queue", "redrive", "jobs", "w")[1] == "redriven 0\n"
        assert remote("queue", "dead", "jobs", "w")[0] == 0
        assert remote("topics", "delete", "jobs")[0] == 0
    finally:
        server.close()


def test_an_unreachable_url_is_one_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["topics", "list", "--url", "http://127.0.0.1:9"])
    assert (
        result.exit_code == 1
        and "unavailable" in result.output
        and "Traceback" not in result.output
    )


def test_bench_appends_what_it_says_and_reports_it(tmp_path: Path) -> None:
    import brook
    from tests.served import Served

    data = str(tmp_path / "d")
    code, out = run(
        "bench", "--data", data, "--records", "500", "--batch", "50", "--producers", "3"
    )
    assert code == 0 and "500 records in" in out and "records/s" in out and "p99" in out
    with brook.open(data) as b:
        assert b.topic("bench").end_offsets() == {0: 500}
    server = Served(tmp_path / "served")
    try:
        url = f"http://127.0.0.1:{server.port}"
        code, out = run(
            "bench", "--url", url, "--records", "40", "--producers", "4", "--topic", "t"
        )
        assert code == 0 and "40 records in" in out
        assert server.request("GET", "/v1/topics/t")[1]["end_offsets"] == {"0": 40}
    finally:
        server.close()
    code, out = run("bench", "--data", data, "--topic", "bad name", "--records", "5")
    assert code == 1 and "invalid_name" in out and "Traceback" not in out


def test_bench_on_s3_reports_requests_per_thousand_records(
    tmp_path: Path, moto: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import brook

    url = moto.fresh_url()
    monkeypatch.setenv("BROOK_ENDPOINT_URL", moto.endpoint)
    code, out = run("bench", "--data", url, "--records", "300", "--batch", "10", "--producers", "3")
    assert code == 0 and "300 records in" in out, out
    assert "object store requests per 1,000 records: PUT" in out
    with brook.open(url, endpoint_url=moto.endpoint) as b:
        assert b.topic("bench").end_offsets() == {0: 300}
