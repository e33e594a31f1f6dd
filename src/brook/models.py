"""The public types of Brook in one place: the values it takes and gives back, and the
handles a broker hands out. Users, the clients and the shells (server, dashboard,
CLI) import them from here, never from the service that happens to define them.

Each name is imported on first use (PEP 562): the remote client takes its value types
from here without loading the engine that defines the handles."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from brook.delivery.handle import Endpoint
    from brook.groups.consumer import Consumer
    from brook.queue.handle import Queue
    from brook.queue.lifecycle import Backoff, Outcome, State, Transition
    from brook.records import (
        Ack,
        Attempt,
        DeadRecord,
        DeliveryCounters,
        DeliveryStats,
        DeliverySummary,
        EndpointInfo,
        EventTypeInfo,
        Histogram,
        HistoryLake,
        Job,
        JobInfo,
        JoinContinuation,
        JoinInfo,
        JoinMember,
        JoinSpec,
        LakeStatus,
        MessageAttempts,
        PartitionInfo,
        PartitionLake,
        PortalLink,
        Published,
        Recent,
        Record,
        Resent,
        ScheduleInfo,
        StorageStats,
        TestResult,
        TimerStats,
        TopicConfig,
        TopicInfo,
        UniqueAck,
    )
    from brook.stats import CommitStats
    from brook.supervisor import Failure
    from brook.timers.checks import TimerSpec
    from brook.timers.model import TimerInfo, TimerPage
    from brook.topic import Topic

_WHERE = {
    "Ack": "brook.records",
    "Attempt": "brook.records",
    "Backoff": "brook.queue.lifecycle",
    "CommitStats": "brook.stats",
    "Consumer": "brook.groups.consumer",
    "DeadRecord": "brook.records",
    "DeliveryCounters": "brook.records",
    "DeliveryStats": "brook.records",
    "DeliverySummary": "brook.records",
    "Endpoint": "brook.delivery.handle",
    "EndpointInfo": "brook.records",
    "EventTypeInfo": "brook.records",
    "Failure": "brook.supervisor",
    "Histogram": "brook.records",
    "HistoryLake": "brook.records",
    "Job": "brook.records",
    "JobInfo": "brook.records",
    "JoinContinuation": "brook.records",
    "JoinInfo": "brook.records",
    "JoinMember": "brook.records",
    "JoinSpec": "brook.records",
    "LakeStatus": "brook.records",
    "MessageAttempts": "brook.records",
    "Outcome": "brook.queue.lifecycle",
    "PartitionInfo": "brook.records",
    "PartitionLake": "brook.records",
    "PortalLink": "brook.records",
    "Published": "brook.records",
    "Queue": "brook.queue.handle",
    "Recent": "brook.records",
    "Record": "brook.records",
    "Resent": "brook.records",
    "ScheduleInfo": "brook.records",
    "State": "brook.queue.lifecycle",
    "StorageStats": "brook.records",
    "TestResult": "brook.records",
    "TimerInfo": "brook.timers.model",
    "TimerPage": "brook.timers.model",
    "TimerSpec": "brook.timers.checks",
    "TimerStats": "brook.records",
    "Topic": "brook.topic",
    "TopicConfig": "brook.records",
    "TopicInfo": "brook.records",
    "UniqueAck": "brook.records",
    "Transition": "brook.queue.lifecycle",
}


def __getattr__(name: str) -> Any:
    """A public type, imported from its module on first use (then kept here)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'brook.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__})


__all__ = [
    "Ack",
    "Attempt",
    "Backoff",
    "CommitStats",
    "Consumer",
    "DeadRecord",
    "DeliveryCounters",
    "DeliveryStats",
    "DeliverySummary",
    "Endpoint",
    "EndpointInfo",
    "EventTypeInfo",
    "Failure",
    "Histogram",
    "HistoryLake",
    "Job",
    "JobInfo",
    "JoinContinuation",
    "JoinInfo",
    "JoinMember",
    "JoinSpec",
    "LakeStatus",
    "MessageAttempts",
    "Outcome",
    "PartitionInfo",
    "PartitionLake",
    "PortalLink",
    "Published",
    "Queue",
    "Recent",
    "Record",
    "Resent",
    "ScheduleInfo",
    "State",
    "StorageStats",
    "TestResult",
    "TimerInfo",
    "TimerPage",
    "TimerSpec",
    "TimerStats",
    "Topic",
    "TopicConfig",
    "TopicInfo",
    "Transition",
    "UniqueAck",
]
