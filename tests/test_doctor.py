"""`brook doctor` as an operator runs it: one line per check, exit status 1 when one
fails, never a traceback; beside a running broker it changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import brook
from tests.s3server import MotoServer
from tests.served import SRC, Served


def doctor(*args: str, cwd: Path) -> tuple[int, dict[str, tuple[str, str]]]:
    """Exit status, and each check's (status, detail) by name (the last of a name)."""
    done = subprocess.run(
        [sys.executable, "-m", "brook.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    checks = {}
    for line in done.stdout.splitlines():
        status, name, detail = line.split(maxsplit=2)
        checks[name] = (status, detail)
    return done.returncode, checks


def test_a_fresh_machine_and_a_running_broker(tmp_path: Path) -> None:
    code, checks = doctor("doctor", "--data", str(tmp_path / "data"), cwd=tmp_path)
    assert code == 0
    assert checks["storage"][0] == "ok" and "brook serve will make it" in checks["storage"][1]
    assert checks["keys"][0] == "warn"  # no keys: loopback only
    served = Served(tmp_path / "data")
    try:
        url = f"http://127.0.0.1:{served.port}"
        code, checks = doctor(
            "doctor", "--data", str(tmp_path / "data"), "--url", url, cwd=tmp_path
        )
        assert code == 0, checks
        assert checks["storage"] == (
            "ok",
            f"{tmp_path / 'data'} is writable (write, fsync and delete work)",
        )
        assert checks["lock"][0] == "ok"
        assert f"pid {served.process.pid}" in checks["lock"][1]
        assert checks["server"] == ("ok", f"{url} is healthy")
        assert not [p for p in (tmp_path / "data").iterdir() if p.name.startswith(".doctor")]
    finally:
        served.close()
    code, checks = doctor("doctor", "--url", "http://127.0.0.1:9", cwd=tmp_path)
    assert code == 1 and checks["server"][0] == "fail"


def test_a_broken_config_is_one_failing_line(tmp_path: Path) -> None:
    (tmp_path / "brook.toml").write_text("linger_ms = 2\nlinger_sm = 3\n")
    code, checks = doctor("doctor", "--data", str(tmp_path / "data"), cwd=tmp_path)
    assert code == 1
    status, detail = checks["config"]
    assert status == "fail" and "linger_sm is not a setting; did you mean linger_ms?" in detail
    assert checks["storage"][0] == "ok"  # the other checks still ran
    (tmp_path / "brook.toml").write_text(
        '[[auth.keys]]\nname = "a"\nsha256 = "' + "0" * 64 + '"\nscopes = ["consume"]\n'
        '[[auth.keys]]\nname = "a"\nsha256 = "' + "1" * 64 + '"\nscopes = ["produce"]\n'
    )
    code, checks = doctor("doctor", "--data", str(tmp_path / "data"), cwd=tmp_path)
    assert code == 1 and checks["keys"][0] == "fail" and "used twice: a" in checks["keys"][1]


def test_an_object_store_its_lease_writes_and_clock(moto: MotoServer, tmp_path: Path) -> None:
    url = moto.fresh_url()
    s3 = ("--storage", url, "--endpoint-url", moto.endpoint, "--cache-dir", str(tmp_path / "c"))
    code, checks = doctor("doctor", *s3, cwd=tmp_path)
    assert code == 0, checks
    assert checks["lease"] == ("ok", "no broker has used this prefix yet")
    assert checks["writes"][0] == "ok" and checks["clock"][0] == "ok"
    served = Served(tmp_path / "unused", *s3)
    try:
        code, checks = doctor("doctor", *s3, cwd=tmp_path)
        assert code == 0, checks
        assert checks["lease"][0] == "ok" and f"pid {served.process.pid}" in checks["lease"][1]
        assert served.request("POST", "/v1/topics/t/records", b"still served")[0] == 200
    finally:
        served.close()
    code, checks = doctor(
        "doctor", "--storage", url, "--endpoint-url", "http://127.0.0.1:9", cwd=tmp_path
    )
    assert code == 1 and checks["storage"][0] == "fail"


def test_the_write_ahead_log_and_what_a_restart_would_replay(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with brook.open(str(data), checkpoint_interval_ms=600_000) as b:
        b.topic("t").append_many([brook.Record(b"x" * 1000) for _ in range(300)])
        code, checks = doctor("doctor", "--data", str(data), cwd=tmp_path)
        assert code == 0
        status, detail = checks["wal"]
        assert status == "ok" and "1 file(s)" in detail
        assert "0.29 MiB past the last checkpoint" in detail, detail
    code, checks = doctor("doctor", "--data", str(data), cwd=tmp_path)
    assert "0.00 MiB past the last checkpoint" in checks["wal"][1]  # closing checkpoints
