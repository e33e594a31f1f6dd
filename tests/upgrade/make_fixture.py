"""Write the upgrade fixture: a data directory in this Brook's format, and what it holds.

    PYTHONPATH=src python -m tests.upgrade.make_fixture

Run once per storage format (brook/storage_format.py), by the Brook that
introduces it; the result is committed and never regenerated: every later Brook
must open `format<N>/data` and serve exactly what `format<N>/expected.json`
says (tests/upgrade/test_upgrade.py). The directory holds every kind of state:
records with keys, headers and binary values over several partitions and
segments, an idempotency key, a stream group's positions, a queue group with
acked, dead and waiting records and its dead-letter topic, timers pending,
fired and cancelled, and a delivery endpoint.
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import brook
from brook.records import Record
from brook.storage_format import FORMAT

HERE = Path(__file__).parent
FAR_FUTURE_MS = 4_102_444_800_000  # 2100-01-01: a timer that stays pending


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def record_out(r: brook.Record) -> dict[str, Any]:
    return {
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": b64(r.key),
        "value": b64(r.value),
        "headers": {k: b64(v) for k, v in sorted((r.headers or {}).items())},
    }


def write(data: Path) -> dict[str, Any]:
    rng = random.Random(20261125)
    with brook.open(str(data), segment_bytes_max=16 * 1024) as b:
        b.create_topic("orders", partitions=3, retention_ms=10 * 365 * 86_400_000)
        orders = b.topic("orders")
        for i in range(240):
            value = f"order-{i}:".encode() + rng.randbytes(rng.randrange(0, 200))
            if i % 4 == 0:
                orders.append_many(
                    [Record(value, key=f"customer-{i % 13}".encode(), headers={"n": b"%d" % i})]
                )
            else:
                orders.append(
                    value, key=f"customer-{i % 13}".encode(), headers={"bin": b"\x00\xff"}
                )
        first = orders.append(b"paid once", key=b"customer-1", idempotency_key="payment-1")
        b.create_topic("events")
        b.topic("events").append_many([Record(bytes([n]) * n) for n in range(1, 60)])

        billing = b.consumer("orders", group="billing")
        billing.poll(max_records=50, timeout=0.5)
        billing.commit()

        q = b.queue("orders", group="emails", max_attempts=3)
        jobs = q.lease(max_records=60, timeout=1.0)
        q.ack(jobs[:40])
        q.discard(jobs[40:45], reason="bounced")
        q.nack(jobs[45:], delay_ms=1, reason="try later")

        pending = b.schedule("orders", b"remind me", at=FAR_FUTURE_MS, timer_id="far")
        cancelled = b.schedule("orders", b"never", at=FAR_FUTURE_MS, timer_id="cancelled")
        b.cancel_timer(cancelled)
        fired = b.schedule("events", b"fired", delay_ms=0, timer_id="fired")
        deadline = time.monotonic() + 30
        while (info := b.timer(fired)) is None or info.state != "fired":
            assert time.monotonic() < deadline, "the timer never fired"
            time.sleep(0.05)

        b.create_endpoint(
            "hook",
            "https://hooks.example.com/brook",
            topics=["orders"],
            secret="whsec_" + base64.b64encode(b"the upgrade fixture secret").decode(),
            enabled=False,
            max_attempts=4,
        )

        expected: dict[str, Any] = {
            "format": FORMAT,
            "brook_version": brook.__version__,
            "topics": {},
            "idempotency": {
                "topic": "orders",
                "key": "payment-1",
                "offset": first.offset,
                "partition": first.partition,
            },
            "group": {
                "topic": "orders",
                "group": "billing",
                "lag": {str(p): n for p, n in billing.lag().items()},
            },
            "queue": {"topic": "orders", "group": "emails", "stats": q.stats(), "max_attempts": 3},
            "timers": {t: b.timer(t).state for t in (pending, cancelled, fired)},  # type: ignore[union-attr]
            "endpoint": {
                "name": "hook",
                "url": "https://hooks.example.com/brook",
                "topics": ["orders"],
                "enabled": False,
                "max_attempts": 4,
            },
        }
        # From format 2 on, acknowledged records may live in the write-ahead log only:
        # the fixture's last records are past its checkpoint, and the directory is left
        # as a power cut would leave it (below), so every later Brook must replay them.
        b.core.checkpoint()
        b.topic("events").append_many([Record(b"after the checkpoint %d" % n) for n in range(7)])
        for info in b.topics():
            topic = b.topic(info.name)
            expected["topics"][info.name] = {
                "partitions": info.partitions,
                "records": {
                    str(p): [record_out(r) for r in topic.read(p, 0, 100_000)]
                    for p in range(info.partitions)
                },
            }
        power_cut_copy(b, data, data.with_name("crashed"))
    shutil.rmtree(data)
    data.with_name("crashed").rename(data)
    return expected


def power_cut_copy(b: brook.Broker, data: Path, copy: Path) -> None:
    """Copy `data` as a power cut now would leave it: each active segment cut to what its
    last sync made durable, the write-ahead log to what it synced (the broker is open)."""
    shutil.copytree(data, copy)
    for state in b.core.topic_states():
        for partition_log in state.logs:
            base, synced_bytes, _ = partition_log.synced_at
            name = copy / partition_log.segments[-1].name
            assert partition_log.segments[-1].base_offset == base
            with name.open("r+b") as segment:
                segment.truncate(synced_bytes)
    wal = b.core.committer.wal
    assert wal is not None
    last = sorted((copy / "wal").glob("*.wal"))[-1]
    with last.open("r+b") as file:
        file.truncate(wal.synced - int(last.stem))


def main() -> None:
    target = HERE / f"format{FORMAT}"
    if target.exists() and "--replace" not in sys.argv:
        sys.exit(f"{target} exists: a fixture is written once per format (--replace to redo it)")
    shutil.rmtree(target, ignore_errors=True)
    data = target / "data"
    expected = write(data)
    (data / "LOCK").unlink()
    (target / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
