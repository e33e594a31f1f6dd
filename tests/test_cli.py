"""The command line, run as users run it."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import brook
from brook import limits
from brook.cli import main
from tests.waiting import slow


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
    code, out = run("queue", "errors", "jobs", "workers", "--data", data)
    assert (code, out) == (0, "1\tbad input\tbad input\n")
    code, out = run("queue", "errors", "jobs", "workers", "--error", "bad input", "--data", data)
    assert (code, out) == (0, "0/1\tattempts=1\tredriven=0\terror='bad input'\n")
    code, out = run("queue", "stats", "jobs", "workers", "--data", data)
    assert "acked: 1" in out and "dead: 1" in out and "ready: 1" in out
    assert run("queue", "redrive", "jobs", "workers", "--data", data)[1] == "redriven: 1 record\n"
    assert run("queue", "redrive", "jobs", "workers", "--data", data)[1] == "redriven: 0 records\n"
    code, out = run("queue", "lease", "jobs", "workers", "-n", "5", "--data", data)
    assert sorted(line.split("\t")[-1] for line in out.splitlines()) == ["three", "two"]
    code, out = run("queue", "lease", "jobs", "bad/group", "--data", data)
    assert code == 1 and "invalid_name" in out and "Traceback" not in out


def test_dead_records_of_one_error_are_paged_and_redriven(tmp_path: Path) -> None:
    import brook

    data = str(tmp_path / "d")
    with brook.open(data) as b:
        b.topic("jobs").append_many([brook.Record(b"%d" % i) for i in range(7)])
        q = b.queue("jobs", "workers")
        for job in q.lease(max_records=7):
            q.discard(job, reason="no customer 42" if job.record.offset % 3 else "card declined")
    listed = ["queue", "errors", "jobs", "workers", "--error", "no customer N", "--data", data]
    code, out = run(*listed, "-n", "2")
    assert [line.split("\t")[0] for line in out.splitlines()] == ["0/1", "0/2"]
    code, out = run(*listed, "-n", "2", "--after", "0/2")
    assert [line.split("\t")[0] for line in out.splitlines()] == ["0/4", "0/5"]
    code, out = run("queue", "errors", "jobs", "workers", "--after", "0/2", "--data", data)
    assert code == 2 and "give --error too" in out
    code, out = run(*listed, "--after", "two", "--data", data)
    assert code == 2 and "PARTITION/OFFSET" in out
    redrive = ["queue", "redrive", "jobs", "workers", "--error", "no customer N", "--data", data]
    assert run(*redrive, "--limit", "3")[1] == "redriven: 3 records\n"
    assert run(*redrive)[1] == "redriven: 1 record\n"
    with brook.open(data) as b:
        stats = b.queue("jobs", "workers").stats()
        assert (stats["ready"], stats["dead"]) == (4, 3), "the declined cards stay dead"


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
    assert code == 1 and "not pending: it was cancelled" in out and "Traceback" not in out
    code, out = run("timers", "cancel", "never-made", "--data", data)
    assert code == 1 and "timer never-made is not known" in out
    for n in range(3):
        run("timers", "schedule", "reminders", f"v{n}", "--delay-ms", f"{n + 7}000000", "--id",
            f"l{n}", "--data", data)  # fmt: skip
    result = CliRunner().invoke(main, ["timers", "list", "--limit", "2", "--data", data])
    lines = result.stdout.splitlines()
    assert lines[0] == "timer\ttopic\tdue"
    assert [line.split("\t")[0] for line in lines[1:]] == ["l0", "l1"], "earliest due first"
    after = result.stderr.split("--after '")[1].split("'")[0]
    code, out = run("timers", "list", "--after", after, "--due-from", "0", "--data", data)
    assert code == 0 and out.splitlines()[1].startswith("l2\treminders\t")
    code, out = run("timers", "list", "--due-from", "soon", "--data", data)
    assert code == 2 and "--due-from" in out
    minute_ago = datetime.datetime.now(datetime.UTC).replace(microsecond=0) - datetime.timedelta(
        minutes=1
    )
    code, out = run(
        "timers", "schedule", "reminders", "past", "--at", minute_ago.isoformat(), "--data", data
    )
    assert code == 0
    timer_id = out.strip()
    import brook

    with brook.open(data) as b:
        deadline = time.monotonic() + slow(10)
        while b.timer(timer_id).state != "fired":  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            time.sleep(0.01)
    code, out = run("timers", "show", timer_id, "--data", data)
    assert "state: fired" in out and "offset: 0" in out and f"due: {minute_ago.isoformat()}" in out
    code, out = run("timers", "schedule", "reminders", "x", "--at", "next tuesday", "--data", data)
    assert code == 2 and "--at" in out
    code, out = run("timers", "show", "nope", "--data", data)
    assert code == 1 and "not known" in out


def test_schedule_and_queue_feature_commands(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    code, out = run(
        "schedules", "create", "nightly", "reports", "go", "--cron", "0 2 * * *",
        "--tz", "Europe/Berlin", "--data", data,
    )  # fmt: skip
    assert code == 0 and "timing: cron '0 2 * * *' Europe/Berlin" in out and "paused: off" in out
    code, out = run("schedules", "list", "--data", data)
    assert code == 0 and out.startswith("NAME\tTOPIC") and "nightly\treports" in out
    assert "paused: on" in run("schedules", "pause", "nightly", "--data", data)[1]
    assert "paused: off" in run("schedules", "resume", "nightly", "--data", data)[1]
    code, out = run("schedules", "create", "bad", "t", "--cron", "soon", "--data", data)
    assert code == 1 and "not a cron expression" in out and "Traceback" not in out
    code, out = run("schedules", "create", "both", "t", "--data", data)
    assert code == 2 and "--cron" in out
    assert run("schedules", "delete", "nightly", "--data", data) == (0, "deleted nightly\n")
    code, out = run("schedules", "show", "nightly", "--data", data)
    assert code == 1 and "schedule_not_found" in out
    # Queue features: a group's limits, records' priorities and delays, one record's standing.
    code, out = run(
        "queue", "configure", "jobs", "w", "--concurrency-per-key", "2", "--key-rate-limit", "5",
        "--data", data,
    )  # fmt: skip
    assert code == 0 and "concurrency_per_key: 2" in out and "key_rate_limit_per_s: 5" in out
    code, out = run("queue", "configure", "jobs", "w", "--ordering", "key", "--data", data)
    assert code == 1 and "concurrency_per_key" in out and "Traceback" not in out
    assert run("produce", "jobs", "later", "--delay-ms", "60000", "--data", data)[0] == 0
    code, out = run(
        "produce", "jobs", "urgent", "--priority", "9", "--header", "trace=abc", "--data", data
    )
    assert code == 0
    code, out = run("queue", "lease", "jobs", "w", "-n", "5", "--data", data)
    assert code == 0 and "urgent" in out and "later" not in out
    code, out = run("queue", "job", "jobs", "w", "0", "0", "--data", data)
    assert code == 0 and "state: delayed" in out and "due_ms:" in out
    code, out = run("produce", "jobs", "x", "--header", "novalue", "--data", data)
    assert code == 2 and "NAME=VALUE" in out
    code, out = run("worker", "no_such_module:app")
    assert code == 2 and "no module 'no_such_module'" in out and "Traceback" not in out


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
        assert remote("queue", "redrive", "jobs", "w")[1] == "redriven: 0 records\n"
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
        assert b.topics() == [], "the run's own topic is deleted after it"
    code, out = run("bench", "--data", data, "--records", "30", "--keep")
    kept = out.split("kept topic ")[1].split()[0]
    with brook.open(data) as b:
        assert kept.startswith("bench.") and b.topic(kept).end_offsets() == {0: 30}
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
        assert b.topics() == []


# ---------------------------------------------------------------- issue 17: one clear line


def brook_command(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`brook ...` in a process of its own, as a user runs it."""
    src = str(Path(__file__).parents[1] / "src")
    return subprocess.run(
        [sys.executable, "-m", "brook.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": src},
        cwd=cwd,
        timeout=60,
    )


def test_a_port_in_use_is_one_line_naming_the_option(tmp_path: Path) -> None:
    from tests.served import Served

    served = Served(tmp_path / "a")
    try:
        done = brook_command("serve", "--data", str(tmp_path / "b"), "--port", str(served.port))
    finally:
        served.close()
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error")]
    assert errors == [
        f"Error: port {served.port} on 127.0.0.1 is in use (another brook serve?); choose "
        "another with --port / --host (BROOK_PORT, BROOK_HOST)"
    ]
    assert "Traceback" not in done.stderr


def test_a_bad_log_level_is_one_line(tmp_path: Path) -> None:
    done = brook_command("serve", "--data", str(tmp_path / "d"), "--log-level", "bogus")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "'bogus' is not one of 'debug', 'info', 'warning', 'error'" in done.stderr


def test_unknown_settings_in_the_config_file_are_refused_with_the_closest_name(
    tmp_path: Path,
) -> None:
    (tmp_path / "brook.toml").write_text("prot = 8081\n")
    done = brook_command("serve", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: brook.toml: prot is not a setting; did you mean port?"
    (tmp_path / "brook.toml").write_text("request_bytes_maxx = 5\n")
    code, out = run("--config", str(tmp_path / "brook.toml"), "topics", "list")
    assert code == 1 and "did you mean request_bytes_max?" in out
    assert not (tmp_path / "brook-data").exists()


def test_every_documented_limit_is_a_setting_with_its_variable_in_help() -> None:
    code, out = run("serve", "--help")
    assert code == 0
    for option in (
        "--port",
        "--request-bytes-max",
        "--record-bytes-max",
        "--inflight-bytes-max",
        "--idempotency-window-ms",
        "--header-timeout-s",
        "--body-timeout-s",
        "--idle-timeout-s",
        "--connections-max",
        "--access-log",
    ):
        assert option in out, option
        variable = "BROOK_" + option[2:].replace("-", "_").upper()
        assert f"env var: {variable}" in " ".join(out.split()), variable


def test_record_bytes_max_and_the_access_log_take_effect(tmp_path: Path) -> None:
    from tests.served import Served

    served = Served(tmp_path / "d", "--record-bytes-max", "1000", "--access-log")
    try:
        status, answer = served.request(
            "POST", "/v1/topics/t/records", {"records": [{"value": "x" * 1001}]}
        )
        assert status == 413 and "record_bytes_max (1000)" in answer["error"]["message"]
        assert (
            served.request("POST", "/v1/topics/t/records", {"records": [{"value": "x" * 900}]})[0]
            == 200
        )
        deadline = time.monotonic() + slow(10)
        while not any('"logger":"brook.access"' in line for line in served.log):
            assert time.monotonic() < deadline, "".join(served.log)
            time.sleep(0.05)
    finally:
        served.close()
    access = [line for line in served.log if '"logger":"brook.access"' in line]
    assert '"path":"/v1/topics/t/records"' in access[0] and '"status":413' in access[0]
    # A limit above the default holds for the clients too: they leave it to the server.
    larger = Served(tmp_path / "e", "--record-bytes-max", str(limits.record_bytes_max_default * 2))
    try:
        big = b"x" * (limits.record_bytes_max_default + 1)
        with brook.connect(f"http://127.0.0.1:{larger.port}") as remote:
            ack = remote.topic("t").append(big)
            assert remote.topic("t").read(ack.partition, ack.offset, 1)[0].value == big
    finally:
        larger.close()
    assert not any("authorization" in line.lower() for line in access)
    started = next(line for line in served.log if "; ready" in line)
    assert "brook 0.1.0 serving" in started and str(tmp_path / "d") in started


def test_consume_says_where_to_start_and_refuses_unknown_topics(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    assert run("produce", "demo", "one", "--data", data)[0] == 0
    code, out = run("consume", "demo", "--data", data)
    assert code == 2 and "--group G" in out and "--from-beginning" in out
    code, out = run("consume", "nope", "--from-beginning", "--data", data)
    assert code == 1 and "topic_not_found" in out
    code, out = run("consume", "nope", "--group", "g", "--data", data)
    assert code == 1 and "topic_not_found" in out
    code, out = run("consume", "demo", "--from-beginning", "-n", "-1", "--data", data)
    assert code == 2 and "-n" in out


def test_a_timer_needs_at_or_delay(tmp_path: Path) -> None:
    code, out = run("timers", "schedule", "t", "v", "--data", str(tmp_path / "d"))
    assert code == 2 and "--at" in out and "--delay-ms" in out
    code, out = run(
        "timers", "schedule", "t", "v", "--at", "1800000000", "--data", str(tmp_path / "d")
    )
    assert code == 1 and "give at=1800000000000" in out


def test_messages_are_written_for_people(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    assert run("topics", "create", "demo", "--data", data)[0] == 0
    code, out = run("topics", "create", "demo", "--partitions", "4", "--data", data)
    assert code == 1 and "TopicConfig" not in out
    assert "topic demo exists with partitions 1 (asked 4)" in out
    code, out = run("topics", "describe", "demo", "--data", data)
    assert "retention_ms: none (keep forever)" in out and "compaction: off" in out
    import brook

    with brook.open(data) as b:
        b.queue("demo", "g")
    code, out = run("queue", "stats", "demo", "g", "--data", data)
    assert "setting backoff: min_ms 1000, factor 2, max_ms 300000" in out
    assert "{" not in out and "None" not in out
    code, out = run("produce", "demo", "--data", data, stdin="one\n")
    assert "appended 1 record\n" in out


def test_queue_stats_through_a_server_creates_nothing(tmp_path: Path) -> None:
    from tests.served import Served

    served = Served(tmp_path / "d")
    try:
        url = f"http://127.0.0.1:{served.port}"
        code, out = run("queue", "stats", "typo", "g", "--url", url)
        assert code == 1 and "topic_not_found" in out
        assert (
            served.request("POST", "/v1/topics/t/records", {"records": [{"value": "x"}]})[0] == 200
        )
        code, out = run("queue", "stats", "t", "typo", "--url", url)
        assert code == 1 and "group_not_found" in out
        assert served.request("GET", "/v1/topics/t/queues/typo")[0] == 404
        _, topics = served.request("GET", "/v1/topics")
        assert [t["name"] for t in topics["topics"]] == ["t"]
    finally:
        served.close()


def test_make_run_takes_port_and_data() -> None:
    root = Path(__file__).parents[1]
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}

    def serve_line(*variables: str) -> str:
        done = subprocess.run(
            ["make", "--no-print-directory", "-n", "run", *variables],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return next(line for line in done.stdout.splitlines() if "brook serve" in line)

    assert serve_line("PORT=8181", "DATA=/tmp/brook-x").split() == [
        ".venv/bin/brook",
        "serve",
        "--data",
        "/tmp/brook-x",
        "--port",
        "8181",
    ]
    # Left out, BROOK_PORT, BROOK_DATA and brook.toml decide (flags would override them).
    assert serve_line().split() == [".venv/bin/brook", "serve"]


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    import click

    if isinstance(command, click.Group):
        return [p for name, sub in command.commands.items() for p in _commands(sub, (*path, name))]
    return [path]


def test_every_command_s_help_shows_the_variables_its_options_read() -> None:
    """README: each command's --help shows the BROOK_* variable beside each option that
    reads one; and every command offering --data reads BROOK_DATA."""
    import click

    for path in _commands(main):
        command: Any = main
        for name in path:
            command = command.commands[name]
        code, out = run(*path, "--help")
        assert code == 0, (path, out)
        flat = " ".join(out.split())
        for option in command.params:
            if isinstance(option, click.Option) and option.envvar:
                assert f"env var: {option.envvar}" in flat, (path, option.name)
            if isinstance(option, click.Option) and option.name == "data":
                assert option.envvar == "BROOK_DATA", path


def test_worker_processes_are_started_with_every_option_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--processes P` starts P copies of one worker with the options in full, the config
    file included (values from it or from BROOK_* are resolved once, here)."""
    import importlib

    worker = importlib.import_module("brook.cli.worker")  # the module, not the command
    config = tmp_path / "brook.toml"
    config.write_text("")
    started: list[list[str]] = []

    def supervise(processes: int, arguments: list[str], metrics_port: int | None) -> int:
        started.append([str(processes), *arguments, str(metrics_port)])
        return 0

    monkeypatch.setattr(worker, "_supervise", supervise)
    result = CliRunner().invoke(
        main,
        ["--config", str(config), "worker", "jobs:app", "--processes", "3", "--tasks", "a,b"],
    )
    assert result.exit_code == 0, result.output
    assert started == [
        ["3", "--config", str(config), "worker", "jobs:app", "--concurrency", "8",
         "--connect-timeout", "60", "--log-level", "info", "--metrics-host", "127.0.0.1",
         "--tasks", "a,b", "None"]
    ]  # fmt: skip


def test_queue_cancel(tmp_path: Path) -> None:
    import brook

    data = str(tmp_path / "d")
    with brook.open(data) as b:
        b.topic("jobs").append_many(
            [
                brook.Record(b"a", key=b"k1"),
                brook.Record(b"b", key=b"k2"),
                brook.Record(b"c", key=b"k1"),
            ]
        )
        b.queue("jobs", "w")
    code, out = run(
        "queue", "cancel", "jobs", "w", "--record", "0/1", "--reason", "typo", "--data", data
    )
    assert (code, out) == (0, "cancelled: 1 record\n  0/1\n")
    code, out = run("queue", "cancel", "jobs", "w", "--key", "k1", "--data", data)
    assert (code, out) == (0, "cancelled: 2 records\n  0/0\n  0/2\n")
    code, out = run("queue", "cancel", "jobs", "w", "--record", "0/1", "--data", data)
    assert (code, out) == (0, "cancelled: 0 records\n"), "a dead record is left as it is"
    with brook.open(data) as b:
        assert b.queue("jobs", "w").job(0, 1).error == "typo"
    for bad in (["--record", "zero"], [], ["--record", "0/0", "--key", "k1"]):
        code, out = run("queue", "cancel", "jobs", "w", *bad, "--data", data)
        assert code == 2 and "Traceback" not in out and len(out.strip().splitlines()) <= 4
