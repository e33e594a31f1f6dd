"""A data directory on a read-only file system, as an operator meets it (a disk
remounted read-only after errors, a snapshot mounted for inspection): commands that
write say so in one line and change nothing; commands that only read still work.

A small tmpfs is mounted and then remounted read-only, which needs root
(CAP_SYS_ADMIN), as tests/crash/test_full_disk.py does.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


def brook_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brook.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def read_only_data(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    assert mounted.returncode == 0, (
        f"this test mounts a small tmpfs and cannot here: {mounted.stderr.strip()} (needs root)"
    )
    try:
        data = disk / "data"
        produced = brook_cli("produce", "orders", "--data", str(data), stdin="one\ntwo\n")
        assert produced.returncode == 0, produced.stderr
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        yield data
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_writers_refuse_in_one_line_and_readers_still_read(read_only_data: Path) -> None:
    data = str(read_only_data)
    for command in (
        ("serve", "--data", data, "--port", "0"),
        ("produce", "orders", "--data", data),
    ):
        line = one_line_error(brook_cli(*command, stdin="three\n"))
        assert "Read-only file system" in line and "writable data directory" in line, line

    listed = brook_cli("topics", "list", "--data", data)
    assert listed.returncode == 0 and "orders" in listed.stdout, listed.stderr
    read = brook_cli("consume", "orders", "--from-beginning", "--data", data)
    assert (read.returncode, read.stdout.split()) == (0, ["one", "two"]), read.stderr
    doctor = brook_cli("doctor", "--data", data)
    assert "Traceback" not in doctor.stdout + doctor.stderr
