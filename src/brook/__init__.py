"""Brook: a durable event broker, job queue and timer service.

import brook
with brook.open("./data") as b:
    ack = b.topic("orders").append(b"hello")
"""

from __future__ import annotations

from typing import Any

from brook import errors
from brook.broker import Broker
from brook.client import AsyncBroker, RemoteBroker
from brook.errors import BadRequest
from brook.groups.consumer import Consumer
from brook.queue.handle import Queue
from brook.queue.lifecycle import Backoff, Transition
from brook.records import Ack, Job, Record, TopicInfo
from brook.timers.checks import TimerSpec
from brook.timers.model import TimerInfo
from brook.topic import Topic

__all__ = [
    "Ack",
    "AsyncBroker",
    "Backoff",
    "Broker",
    "Consumer",
    "Job",
    "Queue",
    "Record",
    "RemoteBroker",
    "TimerInfo",
    "TimerSpec",
    "Topic",
    "TopicInfo",
    "Transition",
    "connect",
    "connect_async",
    "errors",
    "open",
]
__version__ = "0.1.0"


def open(location: str = "./brook-data", **options: Any) -> Broker:
    """Open an embedded broker on a local directory, "s3://bucket/prefix" or "memory://".

    Options are Broker's keyword arguments (linger_ms, batch_bytes_max,
    segment_bytes_max, ...); for a directory also preallocate_bytes; for S3
    endpoint_url, region, cache_dir and cache_bytes (credentials come from the
    usual AWS_* environment variables). Raises Locked if another broker holds
    a directory; on S3 the newest broker wins and older ones get Fenced.
    """
    from brook.storage.local import LocalStorage
    from brook.storage.memory import MemoryStorage

    if not isinstance(location, str) or not location:
        raise BadRequest(
            "location must be a directory path, 'file://DIR', 's3://bucket/prefix' or 'memory://'"
        )
    preallocate = options.pop("preallocate_bytes", None)
    if location.startswith("s3://"):
        from brook.storage.s3 import S3Storage

        s3_options = {
            name: options.pop(name)
            for name in ("endpoint_url", "region", "cache_dir", "cache_bytes", "request_timeout_s")
            if name in options
        }
        return Broker(S3Storage(location, **s3_options), **options)
    if location == "memory://":
        return Broker(MemoryStorage(), **options)
    if location.startswith("file://"):
        location = location.removeprefix("file://")
    elif "://" in location:
        raise BadRequest(
            f"unsupported storage {location!r}: use a directory path, s3://bucket/prefix or memory://"
        )
    storage = LocalStorage(location) if preallocate is None else LocalStorage(location, preallocate)
    return Broker(storage, **options)


def connect(url: str, api_key: str | None = None, timeout: float = 60.0) -> RemoteBroker:
    """A broker served by `brook serve` at `url`, with the same methods as `open`'s."""
    return RemoteBroker(url, api_key=api_key, timeout=timeout)


def connect_async(url: str, api_key: str | None = None, timeout: float = 60.0) -> AsyncBroker:
    """The same as `connect`, with coroutine methods."""
    return AsyncBroker(url, api_key=api_key, timeout=timeout)
