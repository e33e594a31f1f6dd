"""Brook: a durable event broker, job queue and timer service.

import brook
with brook.open("./data") as b:
    ack = b.topic("orders").append(b"hello")
"""

from __future__ import annotations

import os

# First: it chooses, before any of them is imported, whether the hot path's modules
# run compiled or as Python (brook/compiled.py).
from brook import compiled  # noqa: F401  (importing it installs the switch)

# isort: split
import importlib
from typing import TYPE_CHECKING, Any

from brook import limits

if TYPE_CHECKING:
    from brook import api, errors, scheduling
    from brook.broker import Broker
    from brook.client import AsyncBroker, RemoteBroker
    from brook.groups.consumer import Consumer
    from brook.models import Backoff, TimerInfo, TimerSpec, Transition
    from brook.queue.handle import Queue
    from brook.records import Ack, Job, JobInfo, Record, TopicInfo
    from brook.tasks import (
        App,
        Chain,
        Chord,
        CurrentJob,
        Discard,
        Group,
        GroupRef,
        JobContext,
        JobRef,
        JobStatus,
        Retry,
        Signature,
        TaskFailed,
        chain,
        chord,
        current_job,
        group,
    )
    from brook.topic import Topic

# The names above are imported on first use (PEP 562), not by `import brook`: the
# engine, the HTTP client and the task runtime are each a tenth of a second or more to
# import, and most processes use one of them (a worker never loads the engine, a
# `brook serve` never the client); the test suite starts hundreds of them.
_WHERE = {
    "api": "brook",
    "errors": "brook",
    "scheduling": "brook",
    "Broker": "brook.broker",
    "AsyncBroker": "brook.client",
    "RemoteBroker": "brook.client",
    "Consumer": "brook.groups.consumer",
    "Queue": "brook.queue.handle",
    "Backoff": "brook.models",
    "Transition": "brook.models",
    "Ack": "brook.records",
    "Job": "brook.records",
    "JobInfo": "brook.records",
    "Record": "brook.records",
    "TopicInfo": "brook.records",
    "App": "brook.tasks",
    "CurrentJob": "brook.tasks",
    "Discard": "brook.tasks",
    "JobContext": "brook.tasks",
    "JobRef": "brook.tasks",
    "JobStatus": "brook.tasks",
    "Retry": "brook.tasks",
    "TaskFailed": "brook.tasks",
    "current_job": "brook.tasks",
    "Chain": "brook.tasks",
    "Chord": "brook.tasks",
    "Group": "brook.tasks",
    "GroupRef": "brook.tasks",
    "Signature": "brook.tasks",
    "chain": "brook.tasks",
    "chord": "brook.tasks",
    "group": "brook.tasks",
    "TimerSpec": "brook.models",
    "TimerInfo": "brook.models",
    "Topic": "brook.topic",
}


def __getattr__(name: str) -> Any:
    """A public name, imported on first use (then kept as a plain attribute)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'brook' has no attribute {name!r}")
    if module == "brook":
        value: Any = importlib.import_module(f"brook.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, "__version__"})


__all__ = [
    "Ack",
    "App",
    "AsyncBroker",
    "Backoff",
    "Broker",
    "Chain",
    "Chord",
    "Consumer",
    "CurrentJob",
    "Discard",
    "Group",
    "GroupRef",
    "Job",
    "JobContext",
    "JobInfo",
    "JobRef",
    "JobStatus",
    "Queue",
    "Record",
    "RemoteBroker",
    "Retry",
    "Signature",
    "TaskFailed",
    "TimerInfo",
    "TimerSpec",
    "Topic",
    "TopicInfo",
    "Transition",
    "chain",
    "chord",
    "connect",
    "connect_async",
    "current_job",
    "errors",
    "group",
    "open",
    "scheduling",
]
__version__ = "0.1.0"


def open(
    location: str | os.PathLike[str] = "./brook-data", *, read_only: bool = False, **options: Any
) -> Broker:
    """Open an embedded broker on a local directory, "s3://bucket/prefix" or "memory://".

    Options are Broker's keyword arguments (linger_ms, batch_bytes_max,
    segment_bytes_max, ...); for a directory also preallocate_bytes; for S3
    endpoint_url, region, cache_dir, cache_bytes, take_over, wait_for_lease and
    lease_ms (credentials come from the usual AWS_* environment variables).

    One broker owns a location at a time: raises Locked if another holds the
    directory, or a live lease on the prefix (take_over=True takes a prefix
    from a live owner, which is then fenced; wait_for_lease=True waits for the
    lease of a crashed owner to run out). With read_only=True nothing is taken
    or written: the broker reads beside the owner and every write raises ReadOnly.
    """
    from brook.broker import Broker
    from brook.storage import location as locations

    where = locations.parse(location)
    storage_options = locations.split_options(where, options)
    storage = locations.open_storage(where, storage_options, must_exist=read_only)
    return Broker(storage, read_only=read_only, **options)


def connect(
    url: str, api_key: str | None = None, timeout: float = limits.client_timeout_s_default
) -> RemoteBroker:
    """A broker served by `brook serve` at `url`, with the same methods as `open`'s."""
    from brook.client import RemoteBroker

    return RemoteBroker(url, api_key=api_key, timeout=timeout)


def connect_async(
    url: str, api_key: str | None = None, timeout: float = limits.client_timeout_s_default
) -> AsyncBroker:
    """The same as `connect`, with coroutine methods."""
    from brook.client import AsyncBroker

    return AsyncBroker(url, api_key=api_key, timeout=timeout)


if TYPE_CHECKING:  # mypy holds every sync surface to the one API (brook/api.py)

    def _one_api(embedded: Broker, remote: RemoteBroker) -> list[api.BrokerApi]:
        return [embedded, remote]
