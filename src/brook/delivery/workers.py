"""Attempts sent by worker processes, so the HTTP work runs on another core than the
broker's delivery loop (`delivery_workers`, issue 37).

The broker keeps everything that decides (the scheduler, leases, settlements, the
breaker, judging the answer, the status log); a worker only does the attempt: checks
the address, signs, sends, reads the answer (sender.py), and tells the `Result`. So
the guarantees are the broker's alone: a worker that dies or hangs fails its attempts
as connection errors or timeouts, which are retried like any other (at least once),
and is started again for the next attempt, after the pause of brook.processes.Backoff
(longer while workers die young; a broker never gives up on them). A worker dies with
the broker, even one killed with kill -9 (processes.spawn, and die_with_parent in its
main): it is started from the delivery loop's thread, which lives as long as the loop.

Each worker is `python -m brook.delivery.worker` on one end of a socket pair, speaking
length-prefixed msgpack frames (below). An endpoint's attempts all go to one worker
(by a hash of its name), so its connections are pooled in one place; an endpoint's
settings are sent to a worker once per version, not with every attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import subprocess
import sys
import time
import zlib
from typing import cast

import msgspec

from brook import limits, processes
from brook.delivery import addresses
from brook.delivery.endpoint import Endpoint
from brook.delivery.outcome import ErrorKind, Result
from brook.durations import words
from brook.records import Record

log = logging.getLogger("brook.delivery")

_LENGTH = struct.Struct(">I")


# ------------------------------------------------------------------ frames


class Define(msgspec.Struct, tag=True, array_like=True):
    """An endpoint as it stands (sent before its first attempt, and after each change)."""

    endpoint: Endpoint


class Forget(msgspec.Struct, tag=True, array_like=True):
    name: str


class Attempt(msgspec.Struct, tag=True, array_like=True):
    id: int
    endpoint: str
    value: bytes
    headers: dict[str, bytes] | None
    key: bytes | None
    topic: str
    partition: int
    offset: int
    attempt: int
    message_id: str
    now_ms: int

    def record(self) -> Record:
        return Record(
            self.value,
            key=self.key,
            headers=self.headers,
            topic=self.topic,
            partition=self.partition,
            offset=self.offset,
        )


class Done(msgspec.Struct, tag=True, array_like=True):
    id: int
    result: Result


ToWorker = Define | Forget | Attempt
encode = msgspec.msgpack.Encoder().encode
decode_to_worker = msgspec.msgpack.Decoder(ToWorker).decode
decode_done = msgspec.msgpack.Decoder(Done).decode


def frame(message: msgspec.Struct) -> bytes:
    body = encode(message)
    return _LENGTH.pack(len(body)) + body


class Frames:
    """Splits a byte stream into frames' bodies."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        out = []
        start = 0
        while len(buffer) - start >= 4:
            (length,) = _LENGTH.unpack_from(buffer, start)
            if len(buffer) - start - 4 < length:
                break
            out.append(bytes(buffer[start + 4 : start + 4 + length]))
            start += 4 + length
        del buffer[:start]
        return out


class Outbox:
    """Frames written once per turn of the loop: one send for all the frames of a turn."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self._frames: list[bytes] = []

    def put(self, data: bytes) -> None:
        if not self._frames:
            asyncio.get_running_loop().call_soon(self._flush)
        self._frames.append(data)

    def _flush(self) -> None:
        frames, self._frames = self._frames, []
        if not self.transport.is_closing():
            self.transport.write(b"".join(frames))


# ------------------------------------------------------------------ the broker's side


class _Worker(asyncio.Protocol):
    def __init__(self, reach: addresses.Reach, connections_max: int) -> None:
        self.reach = reach
        self.connections_max = connections_max
        self.process: subprocess.Popen[bytes] | None = None
        self.outbox: Outbox | None = None
        self._frames = Frames()
        self._pending: dict[int, asyncio.Future[Result]] = {}
        self._known: dict[str, Endpoint] = {}
        self._serial = 0
        self._backoff = processes.Backoff()
        self._quick_deaths = 0
        self._started_s = 0.0
        self._start_after_s = 0.0
        """No worker is started before this time (time.monotonic): a pause after one died."""
        self._closing = False
        self._reporting: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[None] | None = None

    async def ready(self) -> Outbox:
        """The worker's outbox, the worker started (again) first if need be."""
        if self.outbox is not None:
            return self.outbox
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_future()
            try:
                await self._start()
                self._starting.set_result(None)
            except BaseException as exc:
                self._starting.set_exception(exc)
                self._starting.exception()  # (retrieved: the callers raise it)
                raise
            finally:
                self._starting = None
        else:
            await asyncio.shield(self._starting)
        assert self.outbox is not None
        return self.outbox

    async def _start(self) -> None:
        pause = self._start_after_s - time.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)
        self._started_s = time.monotonic()
        self._closing = False  # (a loop that failed closed it; the next life reuses it)
        await self._reap()
        ours, theirs = socket.socketpair()
        try:
            self.process = processes.spawn(
                [
                    sys.executable,
                    "-m",
                    "brook.delivery.worker",
                    str(theirs.fileno()),
                    str(self.connections_max),
                    *self.reach.arguments(),
                ],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        loop = asyncio.get_running_loop()
        await loop.create_unix_connection(lambda: self, sock=ours)
        log.info("delivery worker %d started", self.process.pid)

    async def _reap(self) -> None:
        """Collect the worker before (its input closed: it exited, or is exiting), off
        the loop's thread; one that lingers is killed."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, process.wait, 5)
        except subprocess.TimeoutExpired:
            process.kill()
            await loop.run_in_executor(None, process.wait)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.outbox = Outbox(cast(asyncio.Transport, transport))  # (uvloop's is not a subclass)
        self._known = {}

    def data_received(self, data: bytes) -> None:
        for body in self._frames.feed(data):
            done = decode_done(body)
            future = self._pending.pop(done.id, None)
            if future is not None and not future.done():
                future.set_result(done.result)

    def connection_lost(self, exc: Exception | None) -> None:
        self.outbox = None
        self._frames = Frames()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_result(
                    Result(error=ErrorKind.CONNECTION, error_message="the delivery worker exited")
                )
        if self.process is not None and not self._closing:
            self._died(self.process)

    def _died(self, process: subprocess.Popen[bytes]) -> None:
        """The worker ended its connection (it exited, or is exiting): when the next one
        may start, and a line saying how it ended."""
        self._quick_deaths = self._backoff.quick_deaths(
            self._quick_deaths, time.monotonic() - self._started_s
        )
        delay_s = self._backoff.delay_s(self._quick_deaths)
        self._start_after_s = time.monotonic() + delay_s
        self._reporting = asyncio.get_running_loop().create_task(self._report(process, delay_s))

    async def _report(self, process: subprocess.Popen[bytes], delay_s: float) -> None:
        """Log how the worker ended (its status, or the signal that killed it), once
        it has: its connection closes a moment before it can be collected."""
        code = process.poll()
        if code is None:  # waited for off the loop's thread
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = await asyncio.get_running_loop().run_in_executor(
                    None, process.wait, limits.delivery_worker_report_wait_s
                )
        log.warning(
            "delivery worker %d %s; another starts at the next attempt, in %.1f s at the soonest",
            process.pid,
            "closed its connection" if code is None else processes.describe_exit(code),
            delay_s,
        )

    async def send(
        self, endpoint: Endpoint, record: Record, attempt: int, message_id: str, now_ms: int
    ) -> Result:
        outbox = await self.ready()
        if self._known.get(endpoint.name) is not endpoint:
            self._known[endpoint.name] = endpoint
            outbox.put(frame(Define(endpoint)))
        self._serial += 1
        key = self._serial
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        outbox.put(
            frame(
                Attempt(
                    key,
                    endpoint.name,
                    record.value,
                    record.headers,
                    record.key,
                    record.topic,
                    record.partition,
                    record.offset,
                    attempt,
                    message_id,
                    now_ms,
                )
            )
        )
        limit_s = endpoint.settings.timeout_ms / 1000 + limits.delivery_worker_guard_s
        try:
            return await asyncio.wait_for(asyncio.shield(future), limit_s)
        except TimeoutError:
            self._pending.pop(key, None)
            return Result(
                error=ErrorKind.TIMEOUT,
                error_message=f"the delivery worker did not answer within {words(limit_s * 1000)}",
            )

    def forget(self, name: str) -> None:
        if self._known.pop(name, None) is not None and self.outbox is not None:
            self.outbox.put(frame(Forget(name)))

    async def close(self) -> None:
        self._closing = True
        if self.outbox is not None:
            self.outbox.transport.close()  # the worker exits at the end of its input
        await self._reap()


class Workers:
    """`count` worker processes, started at the first attempt each is given."""

    def __init__(self, count: int, reach: addresses.Reach, connections_max: int) -> None:
        share = max(1, connections_max // count)
        self._workers = [_Worker(reach, share) for _ in range(count)]

    def _of(self, name: str) -> _Worker:
        return self._workers[zlib.crc32(name.encode()) % len(self._workers)]

    async def send(
        self, endpoint: Endpoint, record: Record, attempt: int, message_id: str, now_ms: int
    ) -> Result:
        try:
            worker = self._of(endpoint.name)
            return await worker.send(endpoint, record, attempt, message_id, now_ms)
        except OSError as exc:  # the worker could not be started
            return Result(
                error=ErrorKind.CONNECTION,
                error_message=f"no delivery worker: {exc.strerror or exc}",
            )

    def forget(self, name: str) -> None:
        self._of(name).forget(name)

    def pids(self) -> list[int]:
        """The workers' process ids (those started)."""
        return [w.process.pid for w in self._workers if w.process is not None]

    async def close_idle(self) -> int:
        return 0  # each worker closes its own idle origins

    async def close(self) -> None:
        await asyncio.gather(*(w.close() for w in self._workers))
