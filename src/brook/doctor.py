"""`brook doctor`: is this machine ready to run a broker on this storage? One line
per check, each saying what it found and, when something is wrong, what to do.

Every check touches the storage as a running broker would, and nothing a running
broker owns: a probe file or object of its own (deleted after), a look at the lock
or the lease (never taken), so it may run beside a live broker.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import httpx

from brook import layout, limits
from brook.codec.wal import WAL_FILE_HEADER_BYTES, scan_entries
from brook.config import Config
from brook.errors import StorageError
from brook.storage.s3 import lease as leases
from brook.storage.s3.manifest import MANIFEST_KEY, decode
from brook.storage.s3.objects import Bucket
from brook.storage.s3.probe import PROBE_PREFIX, check_conditional_writes


class Check(NamedTuple):
    status: str
    """ok, warn or fail."""
    name: str
    detail: str


def config_checks(loaded: Config | None, error: str | None, path: str) -> Iterator[Check]:
    if error is not None or loaded is None:
        yield Check(
            "fail", "config", f"{error}; fix the file (brook serve --help lists the options)"
        )
        return
    where = path if Path(path).is_file() else "no config file (defaults and BROOK_* variables)"
    yield Check("ok", "config", f"{where}: {len(loaded.options)} options, all known")
    if not loaded.keys:
        yield Check(
            "warn",
            "keys",
            "no API keys: the broker serves only on loopback; add keys with "
            "`brook keys create ... >> brook.toml` before serving on a network",
        )
        return
    names = [key.name for key in loaded.keys]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        yield Check("fail", "keys", f"key names used twice: {', '.join(twice)}; give each its own")
        return
    admins = [key.name for key in loaded.keys if "admin" in key.scopes]
    yield Check(
        "ok" if admins else "warn",
        "keys",
        f"{len(loaded.keys)} keys, well formed"
        + ("" if admins else "; none has the admin scope (the dashboard's actions, /metrics)"),
    )


def local_checks(data: str) -> Iterator[Check]:
    root = Path(data).absolute()
    if not root.exists():
        parent = _existing(root)
        if os.access(parent, os.W_OK):
            yield Check("ok", "storage", f"{root} does not exist yet; brook serve will make it")
        else:
            yield Check(
                "fail",
                "storage",
                f"{root} does not exist and {parent} is not writable here; "
                "make it, owned by the user that runs brook",
            )
        yield from _disk("disk", parent)
        return
    probe = root / f".doctor-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"brook doctor")
            os.fsync(fd)
        finally:
            os.close(fd)
        probe.unlink()
        yield Check("ok", "storage", f"{root} is writable (write, fsync and delete work)")
    except OSError as exc:
        yield Check(
            "fail",
            "storage",
            f"cannot write in {root}: {exc.strerror}; the user that runs brook must own it",
        )
    yield _lock(root)
    yield _wal(root)
    yield from _disk("disk", root)


def _wal(root: Path) -> Check:
    """The write-ahead log: its files, and how much lies past the last checkpoint (what a
    restart after a crash replays), read from the files without disturbing the owner."""
    folder = root / layout.WAL
    names = sorted(folder.glob(f"*{layout.WAL_SUFFIX}")) if folder.is_dir() else []
    if not names:
        return Check("ok", "wal", "no write-ahead log yet (written from the first commit round)")
    try:
        raw = (root / layout.WAL_CHECKPOINT).read_bytes()
        checkpoint = int(json.loads(raw)["position"])
    except (OSError, ValueError, KeyError, TypeError):
        checkpoint = 0
    on_disk = sum(p.stat().st_size for p in names)
    last = names[-1]
    start = int(last.stem)
    try:
        data = last.read_bytes()
    except OSError as exc:
        return Check("fail", "wal", f"cannot read {last}: {exc.strerror}")
    at = max(WAL_FILE_HEADER_BYTES, checkpoint - start)
    end = scan_entries(data, at, start + at).end if at < len(data) else start + len(data)
    past = max(0, end - checkpoint)
    return Check(
        "ok",
        "wal",
        f"{len(names)} file(s), {on_disk / 2**20:.1f} MiB on disk; {past / 2**20:.2f} MiB "
        "past the last checkpoint (what a restart after a crash replays)",
    )


def _existing(path: Path) -> Path:
    """`path`, or its nearest parent that exists."""
    return next((p for p in [path, *path.parents] if p.exists()), Path("/"))


def _lock(root: Path) -> Check:
    path = root / layout.LOCK
    if not path.exists():
        return Check("ok", "lock", "free: no broker has run here yet")
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return Check("fail", "lock", f"cannot open {path}: {exc.strerror}")
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = path.read_text().strip() or "?"
        return Check("ok", "lock", f"held by a running broker (pid {pid}); a second one is refused")
    finally:
        os.close(fd)
    return Check("ok", "lock", "free: no broker runs on it now")


def _disk(name: str, where: Path) -> Iterator[Check]:
    usage = shutil.disk_usage(where)
    free_gib = usage.free / (1 << 30)
    if usage.free < limits.doctor_free_bytes_min or usage.free < 0.05 * usage.total:
        yield Check(
            "warn",
            name,
            f"only {free_gib:.1f} GiB free on {where}: a full disk stops appends "
            "(503 until space returns); free some or grow the volume",
        )
    else:
        yield Check("ok", name, f"{free_gib:.1f} GiB free on {where}")


def s3_checks(
    url: str, endpoint_url: str | None, region: str | None, cache_dir: str | None
) -> Iterator[Check]:
    try:
        bucket = Bucket(url, endpoint_url, region, request_timeout_s=10.0, retries_max=1)
        found = bucket.get(MANIFEST_KEY)
    except StorageError as exc:
        yield Check("fail", "storage", f"{exc}")
        return
    yield Check("ok", "storage", f"{url} ({bucket.where}) answers")
    yield _lease(found)
    key = f"{PROBE_PREFIX}doctor-{secrets.token_hex(6)}"
    try:
        before = time.time()
        check_conditional_writes(bucket, key)
        yield Check("ok", "writes", "writable, and it honours If-None-Match and If-Match")
        bucket.put(key, b"brook doctor clock probe")
        after = time.time()
        stored = bucket.stored_at(key)
        bucket.delete(key)
    except StorageError as exc:
        yield Check("fail", "writes", f"{exc}")
        return
    yield _clock(stored - (before + after) / 2, after - before)
    if cache_dir is not None:
        yield from _disk("cache", _existing(Path(cache_dir).absolute()))


def _lease(found: tuple[bytes, str] | None) -> Check:
    if found is None:
        return Check("ok", "lease", "no broker has used this prefix yet")
    try:
        manifest = decode(found[0])
    except ValueError as exc:
        return Check(
            "fail", "lease", f"the manifest cannot be read: {exc}; is this Brook's prefix?"
        )
    now = int(time.time() * 1000)
    if manifest.lease is None or not leases.is_live(manifest.lease, now):
        return Check("ok", "lease", "free: no broker holds the prefix now")
    return Check(
        "ok",
        "lease",
        f"held by {leases.describe(manifest.lease, now)}; a new broker waits for it "
        "or takes over with --take-over",
    )


def _clock(skew_s: float, round_trip_s: float) -> Check:
    """`skew_s`: the store's clock less this machine's, within a second (Last-Modified
    has whole seconds) and half the round trip."""
    shown = f"this clock and the object store's differ by {abs(skew_s):.1f} s"
    slack = 1.0 + round_trip_s / 2
    if abs(skew_s) > limits.doctor_clock_skew_fail_s + slack:
        return Check(
            "fail", "clock", f"{shown}: leases and timers rely on clocks; run NTP (chrony)"
        )
    if abs(skew_s) > limits.doctor_clock_skew_warn_s + slack:
        return Check("warn", "clock", f"{shown}: run NTP (chrony) to keep it small")
    return Check("ok", "clock", f"{shown} (within the measure's {slack:.1f} s)")


def health_check(url: str) -> Check:
    """A running broker's /v1/health."""
    try:
        answer = httpx.get(f"{url.rstrip('/')}/v1/health", timeout=5.0, trust_env=False)
    except httpx.HTTPError as exc:
        return Check("fail", "server", f"{url} does not answer ({exc}); is brook serve running?")
    if answer.status_code == 200:
        return Check("ok", "server", f"{url} is healthy")
    failing = ", ".join(f["loop"] for f in answer.json().get("failing", []))
    return Check(
        "fail", "server", f"{url} answers {answer.status_code}: failing {failing}; see its log"
    )
