"""Which attempts start now, and which queue groups to lease from: the delivery
loop's policy, sans I/O. Time is passed in; the loop (service.py) does what a plan
asks, and a seeded simulation (tests/delivery/test_scheduler_sim.py) drives the
same code with a fake clock.

Each endpoint has a lane: its breaker, pacing, attempts in flight and the records
leased ahead of sending (a lease is one durable write, so one per record would
bound the pace). A plan visits the enabled endpoints in turn, starting one further
along each time (round-robin), and starts as many attempts as each has room for:
its in-flight budget (`max_in_flight`) less what it has in flight, one while its
breaker probes, none while it is open. An attempt then waits for the endpoint's
pacing just before it is sent, so a slow or failing endpoint holds only its own
budget. Records leased ahead for an endpoint that cannot send them (disabled, its
breaker open, deleted) are given back unsent, their attempts not spent; so is a
record whose lease would run out before its answer could come.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, NamedTuple, TypeVar

from brook.delivery.breaker import Breaker
from brook.delivery.breaker import State as BreakerState
from brook.delivery.endpoint import Endpoint
from brook.delivery.pacing import Pacing
from brook.records import Job

Group = TypeVar("Group", bound=Hashable)
"""A queue group as the caller knows it (the loop's QueueGroup; the simulation's own)."""

LEASE_RECORDS_MAX = 100
"""Most records one lease of one group takes."""
AHEAD_S = 1.0
"""An endpoint leases about this many seconds of its pace ahead: enough that leases
(one durable write each) are few at a fast endpoint's pace, few enough that a record
leased ahead waits well within its lease's margin at a slow one's."""
AHEAD_MAX = 2 * LEASE_RECORDS_MAX
LATENCY_WEIGHT = 0.1
"""The weight of each new answer in an endpoint's running latency."""
SEND_MARGIN_MS = 1_000
"""A record is sent only while its lease outlives the answer's timeout by this much."""


class Ahead(NamedTuple, Generic[Group]):
    """A record leased for an endpoint and not yet sent."""

    group: Group
    job: Job
    lease_until_ms: int
    """The earliest its lease may end (from when the lease was asked for)."""


class Lane(Generic[Group]):
    """What the scheduler keeps for one endpoint between plans."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.breaker = Breaker()
        self.pacing = Pacing(endpoint.settings.rate_limit_per_s)
        self.in_flight = 0
        self.ahead: collections.deque[Ahead[Group]] = collections.deque()
        self.leasing = False
        """A lease for this endpoint is under way (one at a time)."""
        self.next_group = 0
        self.latency_ms: float | None = None
        """The running mean of its answers' latency (None before the first)."""

    def update(self, endpoint: Endpoint) -> None:
        """The endpoint's settings changed."""
        if endpoint.settings.rate_limit_per_s != self.endpoint.settings.rate_limit_per_s:
            self.pacing = Pacing(endpoint.settings.rate_limit_per_s)
        self.endpoint = endpoint

    def ahead_target(self) -> int:
        """How many records to hold leased ahead: AHEAD_S of the endpoint's pace (its
        budget over its latency, at most its rate), the budget before any answer."""
        settings = self.endpoint.settings
        if self.latency_ms is None:
            pace = float(settings.max_in_flight)
        else:
            pace = settings.max_in_flight / max(self.latency_ms, 0.1) * 1000 * AHEAD_S
        if settings.rate_limit_per_s is not None:
            pace = min(pace, settings.rate_limit_per_s * AHEAD_S)
        return max(1, min(AHEAD_MAX, round(pace)))

    def answered(self, latency_ms: float) -> None:
        if self.latency_ms is None:
            self.latency_ms = latency_ms
        else:
            self.latency_ms += LATENCY_WEIGHT * (latency_ms - self.latency_ms)


class Send(NamedTuple, Generic[Group]):
    """An attempt to start: counted in flight already; it waits for pacing, then
    `Scheduler.sendable` says whether its lease still allows it."""

    lane: Lane[Group]
    ahead: Ahead[Group]


class Lease(NamedTuple, Generic[Group]):
    """Lease up to `size` records of `group` for `lane`; then `Scheduler.leased`."""

    lane: Lane[Group]
    group: Group
    size: int


class Plan(NamedTuple, Generic[Group]):
    sends: list[Send[Group]]
    leases: list[Lease[Group]]
    releases: list[Ahead[Group]]
    """Records leased ahead to give back unsent (no attempt spent)."""
    dropped: list[Lane[Group]]
    """Lanes of endpoints deleted since the last plan."""


class Scheduler(Generic[Group]):
    def __init__(self, make_lane: Callable[[Endpoint], Lane[Group]] = Lane) -> None:
        self.lanes: dict[str, Lane[Group]] = {}
        self._make_lane = make_lane
        self._start = 0

    def plan(
        self,
        now_ms: int,
        endpoints: Iterable[Endpoint],
        groups_with_work: Callable[[Endpoint], list[Group]],
    ) -> Plan[Group]:
        """What to start now for `endpoints` (all there are)."""
        lanes, dropped = self._sync(endpoints)
        plan: Plan[Group] = Plan([], [], [], dropped)
        for lane in dropped:
            plan.releases.extend(lane.ahead)
            lane.ahead.clear()
        for lane in lanes:
            settings = lane.endpoint.settings
            if not settings.enabled or not lane.breaker.allows(now_ms):
                plan.releases.extend(lane.ahead)
                lane.ahead.clear()
                continue
            room = settings.max_in_flight - lane.in_flight
            if lane.breaker.state is BreakerState.HALF_OPEN:
                room = min(room, 1 - lane.in_flight)
            while room > 0 and lane.ahead:
                lane.in_flight += 1
                room -= 1
                plan.sends.append(Send(lane, lane.ahead.popleft()))
            target = lane.ahead_target()
            if lane.leasing or len(lane.ahead) * 2 > target or room < 0:
                continue
            if lane.breaker.state is BreakerState.HALF_OPEN and lane.in_flight:
                continue  # the probe is out: nothing to lease for until it answers
            groups = groups_with_work(lane.endpoint)
            if not groups:
                continue
            group = groups[lane.next_group % len(groups)]
            lane.next_group += 1
            lane.leasing = True
            probing = lane.breaker.state is BreakerState.HALF_OPEN
            size = 1 if probing else min(target - len(lane.ahead), LEASE_RECORDS_MAX)
            plan.leases.append(Lease(lane, group, size))
        return plan

    def _sync(self, endpoints: Iterable[Endpoint]) -> tuple[list[Lane[Group]], list[Lane[Group]]]:
        """A lane per endpoint (made or updated), in this plan's round-robin order;
        and the lanes of endpoints gone."""
        lanes = []
        names = set()
        for endpoint in endpoints:
            names.add(endpoint.name)
            lane = self.lanes.get(endpoint.name)
            if lane is None:
                lane = self.lanes[endpoint.name] = self._make_lane(endpoint)
            elif lane.endpoint is not endpoint:
                lane.update(endpoint)
            lanes.append(lane)
        dropped = [self.lanes.pop(name) for name in list(self.lanes) if name not in names]
        if lanes:
            self._start = (self._start + 1) % len(lanes)
            lanes = lanes[self._start :] + lanes[: self._start]
        return lanes, dropped

    def leased(
        self, lane: Lane[Group], group: Group, jobs: list[Job], asked_at_ms: int
    ) -> list[Ahead[Group]]:
        """A lease asked for at `asked_at_ms` came back with `jobs`; the records to
        give back at once (the endpoint was deleted meanwhile), if any."""
        lane.leasing = False
        until = asked_at_ms + lane.endpoint.lease_ms
        fetched = [Ahead(group, job, until) for job in jobs]
        if self.lanes.get(lane.endpoint.name) is not lane:
            return fetched
        lane.ahead.extend(fetched)
        return []

    @staticmethod
    def pace(lane: Lane[Group], now_ms: float) -> float:
        """How long an attempt must wait before it may be sent (0: it may go now,
        and its slot is taken)."""
        wait = lane.pacing.wait_ms(now_ms)
        if wait <= 0 and lane.pacing.take(now_ms):
            return 0.0
        return max(wait, 1.0)

    @staticmethod
    def sendable(send: Send[Group], now_ms: int) -> bool:
        """Whether the attempt may go out now that its pacing let it: the endpoint is
        still enabled, its breaker did not open meanwhile (or another probe is out),
        and the record's lease outlives the answer. Else its record is given back."""
        lane = send.lane
        settings = lane.endpoint.settings
        return (
            settings.enabled
            and lane.breaker.allows(now_ms)
            and now_ms + settings.timeout_ms + SEND_MARGIN_MS <= send.ahead.lease_until_ms
        )

    @staticmethod
    def started(lane: Lane[Group]) -> bool:
        """The attempt is being sent; whether it is the breaker's probe."""
        return lane.breaker.started()

    @staticmethod
    def ended(
        lane: Lane[Group],
        failed: bool | None,
        now_ms: int,
        probe: bool,
        latency_ms: float | None = None,
    ) -> None:
        """An attempt is over (its answer came, or it never went: `failed` None, its
        record given back): its slot is free. Its settling may still be under way."""
        lane.in_flight -= 1
        if failed is not None:
            lane.breaker.ended(failed, now_ms, probe)
        if latency_ms is not None:
            lane.answered(latency_ms)
