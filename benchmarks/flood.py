"""A flood of large requests against `brook serve` (issue 16): memory stays near the cap.

CLIENTS connections each send one request of BODY_BYTES (a binary batch of 1 MiB
records) at the same moment, and send it again after Retry-After whenever the
server answers 503 overloaded, until it is acknowledged. The server runs with
the default `inflight_bytes_max` (256 MiB). Reported: the server's resident
memory before and at its peak (VmHWM), the most body bytes it held at once
(its own gauge), how many requests were refused, that every acknowledged record
reads back, and the time to take them all. The baseline is what the requests
would hold with no cap: CLIENTS x BODY_BYTES. Run alone: `python -m benchmarks.flood`.
"""

from __future__ import annotations

import http.client
import statistics
import sys
import threading
import time
from pathlib import Path

from benchmarks.run import section_main
from benchmarks.server import scratch, start, stop
from brook import limits, validate
from brook.codec import encode_batch
from brook.records import Record

TRIALS = 3
CLIENTS = 24
BODY_BYTES = 30 * limits.MIB
RECORD_BYTES = limits.MIB


def peak_rss_mib(pid: int) -> tuple[float, float]:
    """(resident now, peak resident) of a process, MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def body(seed: int) -> bytes:
    records = [
        Record(bytes([seed % 251]) * RECORD_BYTES) for _ in range(BODY_BYTES // RECORD_BYTES)
    ]
    return b"".join(encode_batch(0, 0, validate.records(records)))


def flood() -> dict[str, float]:
    folder = scratch()
    process, port = start(
        [
            sys.executable,
            "-m",
            "brook.cli",
            "serve",
            "--data",
            str(folder / "data"),
            "--port",
            "0",
            "--log-level",
            "info",
        ],
        r"listening on http://127\.0\.0\.1:(\d+) ",
    )
    try:
        bodies = [body(i) for i in range(CLIENTS)]
        idle, _ = peak_rss_mib(process.pid)
        refused = [0]
        acked: list[int] = []
        lock = threading.Lock()
        gate = threading.Barrier(CLIENTS)

        def send(i: int) -> None:
            gate.wait()
            while True:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                try:
                    connection.request(
                        "POST",
                        "/v1/topics/flood/records",
                        body=bodies[i],
                        headers={"content-type": "application/vnd.brook.batch"},
                    )
                    answer = connection.getresponse()
                    answer.read()
                finally:
                    connection.close()
                if answer.status == 200:
                    with lock:
                        acked.append(i)
                    return
                assert answer.status == 503, answer.status
                with lock:
                    refused[0] += 1
                time.sleep(float(answer.getheader("retry-after") or 1))

        threads = [threading.Thread(target=send, args=(i,)) for i in range(CLIENTS)]
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - began
        _, peak = peak_rss_mib(process.pid)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("GET", "/metrics")
        metrics = connection.getresponse().read().decode()
        connection.request("GET", "/v1/topics/flood")
        described = connection.getresponse().read().decode()
        connection.close()
        held_peak = next(
            float(line.split()[1])
            for line in metrics.splitlines()
            if line.startswith("brook_http_request_bytes_held_peak ")
        )
        records = CLIENTS * (BODY_BYTES // RECORD_BYTES)
        assert len(acked) == CLIENTS and f'"0":{records}' in described.replace(" ", ""), described
        return {
            "idle": idle,
            "peak": peak,
            "held_peak": held_peak / limits.MIB,
            "refused": refused[0],
            "seconds": seconds,
        }
    finally:
        stop(process)


def main() -> str:
    import os

    load_before = os.getloadavg()[0]
    runs = []
    for _ in range(TRIALS):
        runs.append(flood())
        print("flood:", {k: round(v, 1) for k, v in runs[-1].items()}, flush=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    def median(name: str) -> float:
        return statistics.median(run[name] for run in runs)

    offered = CLIENTS * BODY_BYTES / limits.MIB
    cap = limits.inflight_bytes_max_default / limits.MIB
    grown = median("peak") - median("idle")
    return "\n".join(
        [
            f"## A flood of large requests (issue 16) — {stamp}",
            "",
            f"- `brook serve` on a fresh directory, default `inflight_bytes_max` ({cap:.0f} MiB); "
            f"{CLIENTS} connections each send a {BODY_BYTES // limits.MIB} MiB binary batch at "
            f"once and resend it after Retry-After when refused; medians of {TRIALS} trials; "
            f"load average before {load_before:.2f}. Every request was acknowledged in the end "
            "and every record read back.",
            "",
            "| figure | median | trials |",
            "| --- | ---: | --- |",
            f"| offered at once (the baseline: held with no cap), MiB | {offered:.0f} | |",
            f"| most body bytes held at once (server's gauge), MiB | {median('held_peak'):.0f} | "
            + ", ".join(f"{r['held_peak']:.0f}" for r in runs)
            + " |",
            f"| resident memory idle → peak, MiB | {median('idle'):.0f} → {median('peak'):.0f} | "
            + ", ".join(f"{r['idle']:.0f}→{r['peak']:.0f}" for r in runs)
            + " |",
            f"| peak growth / cap | {grown / cap:.2f}x | |",
            f"| peak growth / offered | {grown / offered:.2f}x | |",
            f"| requests refused 503 (then resent) | {median('refused'):.0f} | "
            + ", ".join(f"{r['refused']:.0f}" for r in runs)
            + " |",
            f"| seconds to acknowledge all {CLIENTS} | {median('seconds'):.1f} | "
            + ", ".join(f"{r['seconds']:.1f}" for r in runs)
            + " |",
        ]
    )


if __name__ == "__main__":
    section_main(main)
