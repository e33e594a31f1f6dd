"""The server's benchmarks: wrk on loopback against `brook serve`, beside the HTTP stack's ceiling.

Each scenario runs three times on a fresh server and data directory; medians
are reported. Appended to benchmarks/RESULTS.md by `make bench`.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import msgspec

import brook
from brook.codec import encode_batch
from brook.codec.batch import Columns
from brook.records import Record

TRIALS = 3
SECONDS = 5
CONNECTIONS = 64
ROOT = Path(__file__).parents[1]


def scratch() -> Path:
    base = Path(os.environ.get("BROOK_BENCH_DIR", ROOT / ".bench"))
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=base))


def start(command: list[str], ready: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    stream = process.stderr if "serve" in command else process.stdout
    assert stream is not None
    for line in stream:
        found = re.search(ready, line)
        if found:
            threading.Thread(target=stream.read, daemon=True).start()  # keep draining the pipe
            return process, int(found.group(1))
    raise RuntimeError(f"{command} did not start")


def brook_serve(data: Path) -> tuple[subprocess.Popen[str], int]:
    return start(
        [
            sys.executable,
            "-m",
            "brook.cli",
            "serve",
            "--data",
            str(data),
            "--port",
            "0",
            "--log-level",
            "info",
        ],
        r"listening on http://127\.0\.0\.1:(\d+) ",
    )


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def wrk(url: str, body_file: Path, content_type: str, connections: int = CONNECTIONS) -> float:
    """Requests/s of wrk POSTing the file's bytes to `url`."""
    script = body_file.with_suffix(".lua")
    script.write_text(
        f'local f = io.open("{body_file}", "rb")\nwrk.method = "POST"\nwrk.body = f:read("*all")\n'
        f'wrk.headers["Content-Type"] = "{content_type}"\n'
    )
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{SECONDS}s", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw errors:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def batch_file(folder: Path, count: int, size: int) -> Path:
    records = [Record(os.urandom(size)) for _ in range(count)]
    path = folder / f"batch-{count}.bin"
    path.write_bytes(b"".join(encode_batch(0, 0, Columns.from_records(records))))
    return path


# ------------------------------------------------------------------ scenarios


def stack_ceiling(module: str = "benchmarks.null_server") -> float:
    """req/s of one 1 KB record per request to a server that answers at once: Brook's
    HTTP stack with a handler that does nothing, or `benchmarks.raw_server`."""
    folder = scratch()
    body = folder / "one.bin"
    body.write_bytes(os.urandom(1024))
    process, port = start([sys.executable, "-m", module, "0"], r"ready (\d+)")
    try:
        return wrk(f"http://127.0.0.1:{port}/x", body, "application/octet-stream")
    finally:
        stop(process)
        shutil.rmtree(folder)


def records_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1/topics/bench/records"


def post_single_records(port: int, folder: Path) -> float:
    """req/s of wrk POSTing one raw 1 KB record per request to a running server."""
    body = folder / "one.bin"
    body.write_bytes(os.urandom(1024))
    return wrk(records_url(port), body, "application/octet-stream")


def post_binary_batches(port: int, folder: Path, count: int, connections: int) -> float:
    """records/s of wrk POSTing binary batches of `count` 1 KB records."""
    body = batch_file(folder, count, 1024)
    return count * wrk(records_url(port), body, "application/vnd.brook.batch", connections)


def post_json_batches(
    port: int, folder: Path, count: int, connections: int, b64: bool = False
) -> float:
    """records/s of wrk POSTing JSON bodies of `count` records of 1 KB each: text
    (`value`), or random bytes as `value_b64` when `b64`."""
    body = folder / f"batch-{count}{'-b64' if b64 else ''}.json"
    if b64:
        record = {"value_b64": base64.b64encode(os.urandom(1024)).decode()}
    else:
        record = {"value": os.urandom(384).hex()[:1024]}
    body.write_bytes(msgspec.json.encode({"records": [record] * count}))
    return count * wrk(records_url(port), body, "application/json", connections)


def single_records(memory: dict[str, float]) -> float:
    folder = scratch()
    process, port = brook_serve(folder / "data")
    try:
        time.sleep(0.5)
        memory["idle"] = max(memory.get("idle", 0.0), rss_mb(process.pid))
        peak = [0.0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.5):
                peak[0] = max(peak[0], rss_mb(process.pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        rate = post_single_records(port, folder)
        done.set()
        sampler.join()
        memory["loaded"] = max(memory.get("loaded", 0.0), peak[0])
        return rate
    finally:
        stop(process)
        shutil.rmtree(folder)


def batches(count: int, connections: int) -> float:
    folder = scratch()
    process, port = brook_serve(folder / "data")
    try:
        return post_binary_batches(port, folder, count, connections)
    finally:
        stop(process)
        shutil.rmtree(folder)


def json_batches(count: int, connections: int, b64: bool = False) -> float:
    """Records/s appended as JSON bodies of `count` records of 1 KB each (text, or
    `value_b64` when `b64`)."""
    folder = scratch()
    process, port = brook_serve(folder / "data")
    try:
        return post_json_batches(port, folder, count, connections, b64)
    finally:
        stop(process)
        shutil.rmtree(folder)


def json_reads() -> float:
    """Records/s read as JSON pages of 1,000 (GET .../records), 100-byte text records."""
    folder = scratch()
    total = 200_000
    with brook.open(str(folder / "data")) as b:
        records = [Record(os.urandom(50).hex().encode()) for _ in range(1000)]
        for _ in range(total // 1000):
            b.topic("bench").append_many(records)
    process, port = brook_serve(folder / "data")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            started = time.perf_counter()
            offset = 0
            while offset < total:
                page = client.get(
                    "/v1/topics/bench/records", params={"offset": offset, "limit": 1000}
                ).json()
                offset = page["next_offset"]
            return total / (time.perf_counter() - started)
    finally:
        stop(process)
        shutil.rmtree(folder)


def consume_long_poll() -> float:
    """Records/s read through brook.connect with long-poll reads, 100-byte records."""
    folder = scratch()
    total = 1_000_000
    with brook.open(str(folder / "data")) as b:
        records = [Record(v) for v in [os.urandom(100) for _ in range(1000)]]
        for _ in range(total // 1000):
            b.topic("bench").append_many(records)
    process, port = brook_serve(folder / "data")
    try:
        with brook.connect(f"http://127.0.0.1:{port}") as client:
            topic = client.topic("bench")
            started = time.perf_counter()
            offset = 0
            while offset < total:
                got = topic.read(0, offset, 10_000)
                offset = got[-1].offset + 1
            return total / (time.perf_counter() - started)
    finally:
        stop(process)
        shutil.rmtree(folder)


def main() -> str:
    load_before = os.getloadavg()[0]
    memory: dict[str, float] = {}
    scenarios = {
        "stack": lambda: stack_ceiling(),
        "single": lambda: single_records(memory),
        "batch32": lambda: batches(32, CONNECTIONS),
        "batch1000": lambda: batches(1000, 8),
        "json32": lambda: json_batches(32, CONNECTIONS),
        "consume": consume_long_poll,
        "jsonread": json_reads,
    }
    runs: dict[str, list[float]] = {name: [] for name in scenarios}
    for _ in range(TRIALS):
        for name, fn in scenarios.items():
            runs[name].append(fn())
            print(f"server {name}: {runs[name][-1]:,.0f}", flush=True)
    med = {name: statistics.median(values) for name, values in runs.items()}

    def trials(name: str) -> str:
        return ", ".join(f"{v:,.0f}" for v in runs[name])

    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Server — {stamp}",
        "",
        f"- Load generator: wrk 4.1 (2 threads) on the same 2 cores, loopback; {SECONDS} s per trial, "
        f"a fresh `brook serve` and data directory each; load average before {load_before:.2f}.",
        "- Durable: every request is answered only after its batch is fdatasynced. Medians of 3 trials.",
        "",
        "| scenario | median | trials | target | vs baseline |",
        "| --- | ---: | --- | --- | --- |",
        f"| HTTP stack alone, handler does nothing, POST 1 KB, 64 connections (req/s) | {med['stack']:,.0f} | {trials('stack')} | | the ceiling |",
        f"| one 1 KB record per request, 64 connections (req/s) | {med['single']:,.0f} | {trials('single')} | >= 22,000 | {med['single'] / med['stack']:.2f}x the stack alone |",
        f"| binary batches of 32 x 1 KB, 64 connections (records/s) | {med['batch32']:,.0f} | {trials('batch32')} | >= 200,000 | |",
        f"| binary batches of 1,000 x 1 KB, 8 connections (records/s) | {med['batch1000']:,.0f} | {trials('batch1000')} | >= 300,000 | |",
        f"| JSON batches of 32 x 1 KB text, 64 connections (records/s) | {med['json32']:,.0f} | {trials('json32')} | >= 150,000 | |",
        f"| long-poll reads through brook.connect, 100-byte records (records/s) | {med['consume']:,.0f} | {trials('consume')} | >= 500,000 | |",
        f"| JSON reads, pages of 1,000 100-byte records (records/s) | {med['jsonread']:,.0f} | {trials('jsonread')} | | |",
        f"| resident memory of brook serve: idle / under the single-record load (MB) | {memory.get('idle', 0):.0f} / {memory.get('loaded', 0):.0f} | | idle <= 80 | |",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(main())
