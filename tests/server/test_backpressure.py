"""Back-pressure: the request bodies held in memory are capped (inflight_bytes_max).
Past the cap a request is answered 503 with Retry-After before its body is read, so
a flood of large requests neither exhausts memory nor loses an acknowledged record."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from pathlib import Path

from tests.served import Served

MIB = 1024 * 1024


def peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_flood_of_large_bodies_stays_near_the_cap_and_loses_nothing(tmp_path: Path) -> None:
    cap, body_bytes, clients = 16 * MIB, 7 * MIB, 24
    served = Served(tmp_path / "data", "--inflight-bytes-max", str(cap))
    try:
        assert served.request("PUT", "/v1/topics/big")[0] == 200
        served.request("POST", "/v1/topics/big/records", b"warm-up")
        before = peak_rss_bytes(served.process.pid)
        acked: dict[int, bytes] = {}
        statuses: list[int] = []
        lock = threading.Lock()
        start = threading.Barrier(clients)

        def produce(i: int) -> None:
            body = bytes([65 + i % 26]) * body_bytes
            start.wait()
            while True:
                connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
                try:
                    connection.request(
                        "POST",
                        "/v1/topics/big/records",
                        body=body,
                        headers={"content-type": "application/octet-stream"},
                    )
                    answer = connection.getresponse()
                    text = answer.read()
                    with lock:
                        statuses.append(answer.status)
                    if answer.status == 200:
                        offset = int(text.split(b'"offset":')[1].split(b",")[0])
                        with lock:
                            acked[offset] = body[:1]
                        return
                    assert answer.status == 503, text
                    assert b'"overloaded"' in text
                    time.sleep(float(answer.getheader("retry-after") or 1) / 10)
                finally:
                    connection.close()

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        grown = peak_rss_bytes(served.process.pid) - before
        assert set(statuses) <= {200, 503} and statuses.count(200) == clients
        assert statuses.count(503) > 0, "the flood never reached the cap"
        offered = clients * body_bytes
        assert grown < 6 * cap, (
            f"resident memory grew {grown / MIB:.0f} MiB for a {cap // MIB} MiB cap"
        )
        assert grown < offered / 2
        _, metrics = served.request("GET", "/metrics")
        peak = next(
            float(line.split()[1])
            for line in metrics.splitlines()
            if line.startswith("brook_http_request_bytes_held_peak ")
        )
        assert body_bytes <= peak <= cap
        for offset, first in acked.items():
            _, document = served.request("GET", f"/v1/topics/big/records?offset={offset}&limit=1")
            [record] = document["records"]
            assert record["offset"] == offset and record["value"][:1] == first.decode()
            assert len(record["value"]) == body_bytes
    finally:
        served.close()


def test_a_declared_length_over_the_limit_is_refused_before_the_body(tmp_path: Path) -> None:
    """Content-Length of 1 GiB with 3 bytes sent: answered 413 at once, not hung."""
    served = Served(tmp_path / "data")
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            sock.sendall(
                b"POST /v1/topics/t/records HTTP/1.1\r\nhost: x\r\n"
                b"content-type: application/octet-stream\r\n"
                b"content-length: 1073741824\r\n\r\nabc"
            )
            answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 413 "), answer
        assert b"request_bytes_max" in answer
        assert served.request("GET", "/v1/topics/t")[0] == 404, "nothing was created"
    finally:
        served.close()


def test_the_clients_wait_out_back_pressure_and_resend(tmp_path: Path) -> None:
    """503 overloaded means nothing was kept: both clients send again after Retry-After."""
    import asyncio

    import brook

    cap, body_bytes, callers = 8 * MIB, 6 * MIB, 3
    served = Served(tmp_path / "data", "--inflight-bytes-max", str(cap))
    try:
        url = f"http://127.0.0.1:{served.port}"
        with brook.connect(url) as client:
            client.create_topic("big")
            offsets: list[int] = []
            start = threading.Barrier(callers)

            def produce(i: int) -> None:
                start.wait()
                offsets.append(client.topic("big").append(bytes([i]) * body_bytes).offset)

            threads = [threading.Thread(target=produce, args=(i,)) for i in range(callers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert sorted(offsets) == list(range(callers))

            async def produce_async() -> list[int]:
                async with brook.connect_async(url) as aclient:
                    acks = await asyncio.gather(
                        *(aclient.topic("big").append(b"a" * body_bytes) for _ in range(callers))
                    )
                    return sorted(a.offset for a in acks)

            assert asyncio.run(produce_async()) == list(range(callers, 2 * callers))
        _, metrics = served.request("GET", "/metrics")
        refused = next(
            float(line.split()[1])
            for line in metrics.splitlines()
            if line.startswith("brook_http_requests_refused_overloaded_total ")
        )
        assert refused > 0, "the callers never met the cap"
    finally:
        served.close()
