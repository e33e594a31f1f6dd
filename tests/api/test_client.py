"""What only the remote client does: asyncio, connection failures, safe retries."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

import brook
from brook.errors import BadRequest, TopicNotFound, Unavailable
from brook.records import Record
from tests.served import Served
from tests.waiting import slow


def test_the_async_client_has_the_same_api(tmp_path: Path) -> None:
    server = Served(tmp_path / "data")

    async def scenario() -> None:
        async with brook.connect_async(f"http://127.0.0.1:{server.port}") as b:
            info = await b.create_topic("jobs", partitions=2)
            assert info.partitions == 2
            topic = b.topic("jobs")
            first = await topic.append(b"one", key=b"k")
            acks = await topic.append_many([Record(b"two", key=b"k"), Record(b"three", key=b"k")])
            assert [a.offset for a in acks] == [first.offset + 1, first.offset + 2]
            records = await topic.read(first.partition, 0, 10)
            assert [r.value for r in records] == [b"one", b"two", b"three"]
            assert sum((await topic.end_offsets()).values()) == 3
            consumer = await b.consumer("jobs", "workers")
            polled = await consumer.poll(max_records=10, timeout=0)
            assert sorted(r.value for r in polled) == [b"one", b"three", b"two"]
            await consumer.commit()
            assert await consumer.lag() == {0: 0, 1: 0}
            assert [t.name for t in await b.topics()] == ["jobs"]
            with pytest.raises(TopicNotFound):
                await b.topic("missing").read()
            with pytest.raises(BadRequest):
                await topic.append("not bytes")  # type: ignore[arg-type]
            await b.delete_topic("jobs")

    try:
        asyncio.run(scenario())
    finally:
        server.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_server_is_unavailable_not_a_traceback() -> None:
    with brook.connect(f"http://127.0.0.1:{free_port()}", timeout=2) as b:
        started = time.monotonic()
        with pytest.raises(Unavailable, match="cannot reach"):
            b.topics()  # safe to resend: retried with backoff first
        assert time.monotonic() - started < 10
        with pytest.raises(Unavailable):
            b.topic("t").append(
                b"x"
            )  # not safe to resend without an idempotency key: fails at once


def test_appends_with_idempotency_keys_are_retried_safely(tmp_path: Path) -> None:
    port = free_port()
    with brook.connect(f"http://127.0.0.1:{port}", timeout=5) as b:
        # Nothing listens yet: a retry-safe append is resent until the server is up.
        server: list[Served] = []

        def start_soon() -> None:
            time.sleep(0.3)
            server.append(Served(tmp_path / "data", "--port", str(port)))

        import threading

        starter = threading.Thread(target=start_soon)
        starter.start()
        try:
            deadline = time.monotonic() + slow(20)
            while True:
                try:
                    ack = b.topic("t").append(b"once", idempotency_key="k-1")
                    break
                except Unavailable:
                    assert time.monotonic() < deadline, "the server never came up"
            again = b.topic("t").append(b"once", idempotency_key="k-1")
            assert again == ack and b.topic("t").end_offsets() == {0: 1}
        finally:
            starter.join()
            for s in server:
                s.close()
