"""Fuzz targets: functions of arbitrary bytes that raise AssertionError when Brook misbehaves.

Each is run by hypothesis in `make test` (tests/fuzz/test_targets.py) and by atheris,
coverage-guided, in `make reliability` (tests/fuzz/atheris_run.py). They run Brook's
code in this process, with no sockets or disks, so a fuzzer tries thousands of
inputs a second.

- `http_stream`: bytes into the HTTP connection handler (parser, limits, routing
  and the whole API over an in-memory broker): every answer is a well-formed
  response with a status below 500, a refused stream is closed, and nothing
  escapes as an exception.
- `batch_body`: a binary batch body (docs/PROTOCOL.md) as a client would post it:
  BadRequest or records whose checksums held, nothing else.
- `segment_file`: bytes as a partition's only segment file, then recovery: it opens
  (or reports CorruptData), serves only whole checksummed batches, and takes a new
  record after them.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import brook
from brook import validate
from brook.broker import Broker
from brook.codec.batch import Columns
from brook.errors import BadRequest, BrookError, CorruptData, RecordTooLarge, StorageError
from brook.log.partition import LogSettings, PartitionLog
from brook.records import Record
from brook.server.api import Api
from brook.server.auth import Authenticator
from brook.server.http import Connections, HttpLimits, HttpProtocol
from brook.storage.memory import MemoryStorage

STATUS_LINE = re.compile(rb"HTTP/1\.1 (\d{3}) [^\r\n]*\r\n")


class RecordingTransport:
    """Enough of an asyncio transport to collect what the server writes: the HTTP
    protocol driven without a socket (the fuzz targets, tests/server/test_http_sans_io.py)."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False
        self.eof = False

    def write(self, data: bytes) -> None:
        self.written += data

    def writelines(self, parts: list[bytes]) -> None:
        for part in parts:
            self.written += part

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


class HttpHarness:
    """One in-memory broker and API, reused across inputs (as a server is across clients)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.broker = Broker(MemoryStorage())
        self.broker.topic("t").append(b"seed")
        self.api = Api(self.broker, self.loop, Authenticator([]))
        self.connections = Connections(HttpLimits(request_bytes_max=64 * 1024))

    def exchange(self, data: bytes) -> tuple[bytes, bool]:
        """Feed `data` to a fresh connection in two pieces; what it wrote, and whether
        it ended the stream (closed, or half-closed after a refusal)."""
        transport = RecordingTransport()
        protocol = HttpProtocol(self.api, self.connections)

        async def run() -> None:
            protocol.connection_made(transport)  # type: ignore[arg-type]
            middle = len(data) // 2
            for piece in (data[:middle], data[middle:]):
                if piece:
                    protocol.data_received(piece)
                await asyncio.sleep(0)
            for _ in range(2000):  # let the worker answer what was complete
                worker = protocol.worker
                if worker is None or worker.done() or protocol._idle is not None:
                    break
                await asyncio.sleep(0.0005)
            protocol.connection_lost(None)
            await asyncio.sleep(0)

        self.loop.run_until_complete(run())
        return bytes(transport.written), transport.closed or transport.eof

    def close(self) -> None:
        for task in asyncio.all_tasks(self.loop):
            task.cancel()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.broker.close()
        self.api.reads.shutdown()
        self.loop.close()


def check_responses(written: bytes, heads: bool = False) -> list[int]:
    """The statuses of the well-formed responses in `written`; AssertionError otherwise.
    With `heads` (the input asked HEAD), a response may stop at its head."""
    statuses = []
    at = 0
    while at < len(written):
        found = STATUS_LINE.match(written, at)
        assert found, f"not a response at byte {at}: {written[at : at + 80]!r}"
        head_end = written.index(b"\r\n\r\n", at) + 4
        length = re.search(rb"content-length: (\d+)\r\n", written[at:head_end])
        assert length, "a response without content-length"
        status = int(found.group(1))
        assert status < 500 or status == 503, f"{status}: {written[head_end : head_end + 300]!r}"
        statuses.append(status)
        if heads and (head_end == len(written) or STATUS_LINE.match(written, head_end)):
            at = head_end  # the answer to a HEAD: its body's length, no body
            continue
        at = head_end + int(length.group(1))
        assert at <= len(written), "a response shorter than its content-length"
    return statuses


_harness: HttpHarness | None = None


def http_stream(data: bytes) -> None:
    global _harness
    if _harness is None:
        _harness = HttpHarness()
    written, ended = _harness.exchange(data)
    check_responses(written, heads=b"HEAD" in data)
    if b"\r\nconnection: close\r\n" in written:
        assert ended, "a response said the connection closes, and it stayed open"


def batch_body(data: bytes) -> None:
    try:
        body = validate.batch_body(data)
    except (BadRequest, RecordTooLarge):
        return
    columns = body if isinstance(body, Columns) else body.columns()
    assert len(columns.values) == len(body)
    assert all(isinstance(value, bytes | memoryview) for value in columns.values)


def segment_file(data: bytes) -> None:
    storage = MemoryStorage()
    name = "topics/t/0/00000000000000000000.seg"
    storage.write_atomic(name, data)
    settings = LogSettings(1 << 20, 1 << 40)
    try:
        log = PartitionLog.open(storage, "t", 0, settings, 1_800_000_000_000)
    except CorruptData:
        return  # reported, never served
    except BrookError as exc:
        raise AssertionError(f"recovery raised {type(exc).__name__}: {exc}") from None
    try:
        records = log.read(0, 100_000)
    except CorruptData:
        return
    assert [r.offset for r in records] == list(range(len(records)))
    end = log.durable_offset
    assert end >= len(records)
    try:  # the committer's steps, without its threads: append, sync, publish
        written = log.append([validate.one(b"after", None, None, None)], 1_800_000_000_001)
        log.sync()
        assert log.publish(written)
    except (CorruptData, StorageError):
        return
    [again] = log.read(end, 1)
    assert (again.offset, again.value) == (end, b"after")


TARGETS = {"http_stream": http_stream, "batch_body": batch_body, "segment_file": segment_file}


def _post(method: bytes, path: bytes, body: bytes) -> bytes:
    return b"%s %s HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        method,
        path,
        len(body),
        body,
    )


SEEDS: dict[str, list[bytes]] = {
    "http_stream": [
        b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n",
        _post(b"POST", b"/v1/topics/t/records", b'{"records":[{"value":"hello","key":"k"}]}'),
        b"GET /v1/topics/t/records?offset=0&limit=5 HTTP/1.1\r\n\r\n",
        _post(b"POST", b"/v1/topics/t/queues/g/lease", b'{"max_records":2}'),
        _post(b"POST", b"/v1/timers", b'{"topic":"t","value":"x","delay_ms":1000}'),
        _post(b"PUT", b"/v1/endpoints/e", b'{"url":"https://example.com/","topics":["t"]}'),
        b"GET /v1/topics/t/groups/g/poll?max_records=3 HTTP/1.1\r\n\r\n"
        + _post(b"POST", b"/v1/topics/t/groups/g/commit", b'{"offsets":{"0":1}}'),
        b"PUT /v1/topics/n HTTP/1.1\r\ncontent-type: application/json\r\n"
        b'transfer-encoding: chunked\r\n\r\n10\r\n{"partitions":2}\r\n0\r\n\r\n',
        b"GET /ui HTTP/1.1\r\n\r\n",
    ],
    "batch_body": [],
    "segment_file": [],
}


def _seed_binary() -> None:
    """Valid batches and a valid segment, built by Brook itself, to start from."""
    from brook.codec import encode_batch

    records = [Record(b"v%d" % i, key=b"k" if i % 2 else None) for i in range(5)]
    SEEDS["batch_body"].append(b"".join(encode_batch(0, 0, records)))
    storage = MemoryStorage()
    with brook.Broker(storage) as b:
        b.topic("t").append_many(records)
        b.topic("t").append(b"second batch", headers={"h": b"v"})
    raw = storage.read_all("topics/t/0/00000000000000000000.seg")
    assert raw is not None
    SEEDS["segment_file"].append(raw)


_seed_binary()
