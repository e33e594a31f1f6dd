"""scripts/unasync.py makes the sync client from the async one: what it changes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts/unasync.py"
spec = importlib.util.spec_from_file_location("unasync", SCRIPT)
assert spec is not None and spec.loader is not None
unasync = importlib.util.module_from_spec(spec)
spec.loader.exec_module(unasync)

ASYNC = '''import asyncio

class AsyncQueue:
    """A queue group over HTTP, as coroutines; the same methods as `Queue`."""

    async def lease(self) -> list[Job]:
        await asyncio.sleep(1)
        jobs: list[Job] = await self._broker._do(protocol.lease())
        return (await self._state())["jobs"] + jobs

    async def __aenter__(self) -> AsyncQueue:
        async with self._http as http:
            await http.aclose()
'''
SYNC = '''import time

class RemoteQueue:
    """A queue group over HTTP; the same methods as `Queue`."""

    def lease(self) -> list[Job]:
        time.sleep(1)
        jobs: list[Job] = self._broker._do(protocol.lease())
        return self._state()["jobs"] + jobs

    def __enter__(self) -> RemoteQueue:
        with self._http as http:
            http.close()
'''


def test_the_coroutines_are_taken_out() -> None:
    source = Path("aio.py")
    assert unasync.unasync(ASYNC, source) == unasync.HEADER.format(source.name) + SYNC


def test_the_sync_client_is_what_the_async_one_makes() -> None:
    assert unasync.main(["--check"]) == 0
