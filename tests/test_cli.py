"""The command line, run as users run it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

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
    assert code == 1 and "topic_not_found" in out and "Traceback" not in out
    code, out = run("topics", "create", "bad name", "--data", data)
    assert code == 1 and "invalid_name" in out


def test_serve_holds_the_lock_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    data = tmp_path / "d"
    env = {**os.environ, "BROOK_DATA": str(data)}
    server = subprocess.Popen(
        [sys.executable, "-m", "brook.cli", "serve", "--port", "0"],
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert server.stderr is not None
        for line in server.stderr:
            if "ready" in line:
                break
        code, out = run("topics", "list", "--data", str(data))
        assert code == 1 and "in use by another broker" in out
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    finally:
        server.kill()
        server.wait()
        if server.stderr is not None:
            server.stderr.close()
