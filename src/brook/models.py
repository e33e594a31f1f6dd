"""The public types of Brook in one place: the values it takes and gives back, and the
handles a broker hands out. Users, the clients and the shells (server, dashboard,
CLI) import them from here, never from the service that happens to define them."""

from __future__ import annotations

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
)
from brook.stats import CommitStats
from brook.supervisor import Failure
from brook.timers.checks import TimerSpec
from brook.timers.model import TimerInfo, TimerPage
from brook.topic import Topic

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
]
