"""Tasks with `isolation="process"`: each run in a child process, killed at the deadline.

A sync function cannot be stopped from another thread; a process can. Each of the
worker's slots that runs such a task keeps one child process (`python -m
brook.tasks.isolation`), started on first use and again after a kill, that imports
the task's module itself and runs one call at a time. Calls and outcomes cross a
socket pair as length-prefixed msgpack: the call as its record's JSON, the result as
JSON bytes, a failure as the error summary the worker would have made. At the
deadline the worker kills the child (Celery's hard time limit): the run ends at once,
its attempt fails, and its slot and key are free. A child dies with its worker.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import msgspec

from brook import limits, processes
from brook.tasks import context, payload
from brook.tasks.hooks import Hooks

_LENGTH = struct.Struct(">I")
STARTED = "started"
"""The child's first answer to a call: it has the function and runs it now."""


class Call(msgspec.Struct, frozen=True):
    module: str
    qualname: str
    value: bytes
    """The record's value: the call's JSON."""
    headers: dict[str, bytes] | None
    """The record's headers (a join's results ride in them)."""
    ref: str
    task: str
    attempt: int
    key: bytes | None
    deadline: float | None


class Answer(msgspec.Struct, frozen=True):
    action: str
    """ack, nack or discard (as the worker settles it)."""
    result: bytes | None = None
    reason: str = ""
    delay_ms: int | None = None
    note: str = ""
    """Why a result was not kept (logged by the worker)."""


def _send(sock: socket.socket, message: Any) -> None:
    body = msgspec.msgpack.encode(message)
    sock.sendall(_LENGTH.pack(len(body)) + body)


def _receive(sock: socket.socket, kind: type[Any]) -> Any:
    """The next message, or None once the other side is gone."""
    head = _exactly(sock, _LENGTH.size)
    if head is None:
        return None
    body = _exactly(sock, _LENGTH.unpack(head)[0])
    return None if body is None else msgspec.msgpack.decode(body, type=kind)


def _exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        try:
            chunk = sock.recv(min(left, 1 << 20))
        except OSError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# ------------------------------------------------------------------ the worker's side


class Child:
    """One slot's child process: runs calls one at a time; `kill` ends the one running."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._mutex = threading.Lock()

    def run(self, call: Call, on_start: Callable[[], None]) -> Answer | None:
        """Run `call` in the child (started first if need be); `on_start` is called once
        the child has the task's function and begins to run it (the run's deadline
        counts from then, not from the child's own start). The answer, or None when the
        child died or was killed before it answered."""
        sock = self._started()
        try:
            _send(sock, call)
            sock.settimeout(limits.worker_child_start_ms_max / 1000)
            started: Answer | None = _receive(sock, Answer)
            sock.settimeout(None)
        except OSError:
            started = None
        if started is None or started.action != STARTED:
            self.close()
            if started is not None:
                return started  # the function could not be found: that answer says why
            return Answer(
                "nack",
                reason="the task's child process did not start within "
                f"{limits.worker_child_start_ms_max} ms",
            )
        on_start()
        answer: Answer | None = _receive(sock, Answer)
        if answer is None:
            self.close()
        return answer

    def kill(self) -> None:
        """Kill the child now (its call's deadline passed); the next run starts another."""
        with self._mutex:
            process = self._process
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)

    def close(self) -> None:
        with self._mutex:
            process, self._process = self._process, None
            sock, self._socket = self._socket, None
        if sock is not None:
            sock.close()
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait()

    def _started(self) -> socket.socket:
        with self._mutex:
            process, sock = self._process, self._socket
        if sock is not None and process is not None and process.poll() is None:
            return sock
        self.close()
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            process = processes.spawn(
                [sys.executable, "-m", "brook.tasks.isolation", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        with self._mutex:
            self._process, self._socket = process, ours
        return ours


# ------------------------------------------------------------------ the child's side


def _found(module: str, qualname: str) -> Any:
    """The task (or its bare function), found as its worker found it: its module
    imported here."""
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


_STARTED: set[int] = set()
"""The hooks of the apps whose on_worker_start ran in this child."""


def _hooks_of(found: Any) -> Hooks | None:
    """The hooks of the task's app (on_worker_start called on the first meeting)."""
    hooks = getattr(getattr(found, "app", None), "hooks", None)
    if not isinstance(hooks, Hooks):
        return None
    if id(hooks) not in _STARTED:
        _STARTED.add(id(hooks))
        hooks.call("on_worker_start", None)
    return hooks


def _run(call: Call, sock: socket.socket) -> Answer:
    from brook.tasks.refs import Discard, Retry

    try:
        found = _found(call.module, call.qualname)
        fn = getattr(found, "fn", found)  # a Task wraps its function
        arguments = payload.decode_job(call.value, call.headers)
    except Exception as exc:
        return Answer("nack", reason=payload.error_summary(exc))
    hooks = _hooks_of(found)
    _send(sock, Answer(STARTED))
    token = context.enter(
        context.CurrentJob(call.ref, call.task, call.attempt, call.key, call.deadline)
    )
    try:
        if hooks is not None and hooks.wanted("on_start", call.task):
            hooks.call("on_start", call.task, context.current_job())
        value = fn(*arguments.args, **arguments.kwargs)
        if asyncio.iscoroutine(value):
            value = asyncio.run(value)
    except Retry as exc:
        return Answer("nack", reason=exc.reason or "Retry", delay_ms=exc.delay_ms)
    except Discard as exc:
        return Answer("discard", reason=exc.reason or "Discard")
    except BaseException as exc:  # the task's failure, whatever it is, is its attempt's
        return Answer("nack", reason=payload.error_summary(exc))
    finally:
        context.leave(token)
    if value is None:
        return Answer("ack")
    result, why_not = payload.encode_result(value)
    return Answer("ack", result=result, note=why_not)


def main(argv: list[str]) -> None:
    processes.die_with_parent()
    descriptor = int(argv[0])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker decides when a run ends
    sock = socket.socket(fileno=descriptor)
    while True:
        call = _receive(sock, Call)
        if call is None:
            return
        _send(sock, _run(call, sock))


if __name__ == "__main__":
    main(sys.argv[1:])
