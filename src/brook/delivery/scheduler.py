"""Which attempts start now, and which queue groups to lease from: the delivery
loop's policy, sans I/O. Time is passed in; the loop (service.py) does what a plan
asks, and a seeded simulation (tests/delivery/test_scheduler_sim.py) drives the
same code with a fake clock.

Each endpoint has a lane: its breaker, pacing, attempts in flight and the records
leased ahead of sending (a lease is one durable write, so one per record would
bound the pace). A plan visits the endpoints it is given in turn, starting one
further along each time (round-robin), and starts as many attempts as each has
room for: its in-flight budget (`max_in_flight`) less what it has in flight, one
while its breaker probes, none while it is open; and within the connections of its
origin (`origin_max`, shared by the endpoints of one scheme, host and port) and of
all (`connections_max`). A lane held back by those waits its turn (first come,
first served) and is handed back by `ended` when a slot frees. An attempt then
waits for the endpoint's pacing just before it is sent, so a slow or failing
endpoint holds only its own budget. Records leased ahead for an endpoint that cannot send them (disabled, its
breaker open, deleted) are given back unsent, their attempts not spent; so is a
record whose lease would run out before its answer could come.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, NamedTuple, TypeVar
from urllib.parse import urlsplit

from brook import limits
from brook.delivery.breaker import Breaker
from brook.delivery.breaker import State as BreakerState
from brook.delivery.endpoint import Endpoint
from brook.delivery.pacing import Pacing
from brook.records import Job

Group = TypeVar("Group", bound=Hashable)
"""A queue group as the caller knows it (the loop's QueueGroup; the simulation's own)."""

AHEAD_S = 1.0
"""An endpoint leases about this many seconds of its pace ahead: enough that leases
(one durable write each) are few at a fast endpoint's pace, few enough that a record
leased ahead waits well within its lease's margin at a slow one's."""
AHEAD_MAX = 2 * limits.delivery_lease_records_max
AHEAD_SLOW_S = 4.0
"""A slow endpoint (one whose AHEAD_S of pace is fewer than AHEAD_SLOW_MIN records: a
slow receiver, or a small share of busy connections) leases up to this many seconds
of its pace ahead, so its leases are not of a record or two each; well within a
lease's margin (LEASE_MARGIN_MS less limits.delivery_send_margin_ms)."""
AHEAD_SLOW_MIN = 16
LATENCY_WEIGHT = 0.1
"""The weight of each new answer in an endpoint's running latency."""
GAP_WEIGHT = 0.1
"""The weight of each new gap between an endpoint's answers in its running pace."""
BUSY_GAP_MS = 5_000
"""A longer gap between answers was a pause, not the endpoint's pace."""

RATE_WINDOW_MS = 250
RATE_WEIGHT = 0.3
AHEAD_CAP_S = 2.0
"""The records an origin's endpoints hold leased ahead together: this long of its pace."""
LEASE_HANDS = 2
"""Lanes waiting to lease handed their turn per attempt that ends."""
WAITING_LOOKS = 64
"""Most waiting lanes looked at when a connection frees."""

Origin = tuple[str, str, int]
"""(scheme, host, port): the endpoints of one origin share its connections."""


def origin_of(endpoint: Endpoint) -> Origin:
    parts = urlsplit(endpoint.settings.url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return (parts.scheme, parts.hostname or "", port)


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
        self.gap_ms: float | None = None
        """The running mean of the time between its answers while busy: its pace as
        it goes, slots shared with other endpoints included (None before two)."""
        self.answered_ms: float | None = None
        self.origin = origin_of(endpoint)
        self.waiting = False
        """Held back by its origin's or all connections: in the scheduler's queue."""
        self.handed = False
        """Handed a freed connection by the queue: it may take it before those waiting."""
        self.reserved = 0
        """Records its lease under way may bring (counted against its origin's cap)."""

    def update(self, endpoint: Endpoint) -> None:
        """The endpoint's settings changed."""
        if endpoint.settings.rate_limit_per_s != self.endpoint.settings.rate_limit_per_s:
            self.pacing = Pacing(endpoint.settings.rate_limit_per_s)
        self.endpoint = endpoint

    def ahead_target(self, share: float = float("inf"), share_pace: float | None = None) -> int:
        """How many records to hold leased ahead: AHEAD_S of the endpoint's own pace
        (its budget over its latency, at most its rate; up to AHEAD_SLOW_S of it when
        that is few), and no more than its share of its origin (`share` of its
        connections before any answer, `share_pace` of its answers per second after)
        unless that is fewer than AHEAD_SLOW_MIN: a lease of a record or two per
        endpoint would cost a durable write each. The origin's cap on records held
        ahead (Scheduler) keeps those few-and-many from waiting past their leases."""
        settings = self.endpoint.settings
        if self.latency_ms is None:
            own = float(settings.max_in_flight)
            shared = max(1.0, share)
        else:
            own = settings.max_in_flight / max(self.latency_ms, 0.1) * 1000 * AHEAD_S
            if self.gap_ms is not None:
                own = min(own, 1000 / max(self.gap_ms, 0.01) * AHEAD_S)
            shared = share_pace * AHEAD_S if share_pace is not None else share
        if settings.rate_limit_per_s is not None:
            own = min(own, settings.rate_limit_per_s * AHEAD_S)
        if own < AHEAD_SLOW_MIN and self.latency_ms is not None:
            own = min(AHEAD_SLOW_MIN, own * AHEAD_SLOW_S / AHEAD_S)
        target = min(own, max(shared, AHEAD_SLOW_MIN))
        return max(1, min(AHEAD_MAX, round(target)))

    def answered(self, latency_ms: float, now_ms: float) -> None:
        if self.latency_ms is None:
            self.latency_ms = latency_ms
        else:
            self.latency_ms += LATENCY_WEIGHT * (latency_ms - self.latency_ms)
        last, self.answered_ms = self.answered_ms, now_ms
        if last is None or not 0 <= now_ms - last <= BUSY_GAP_MS:
            return
        gap = now_ms - last
        self.gap_ms = gap if self.gap_ms is None else self.gap_ms + GAP_WEIGHT * (gap - self.gap_ms)


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


class Scheduler(Generic[Group]):
    def __init__(
        self,
        make_lane: Callable[[Endpoint], Lane[Group]] = Lane,
        connections_max: int = 1 << 30,
        origin_max: int = 1 << 30,
    ) -> None:
        self.lanes: dict[str, Lane[Group]] = {}
        self._make_lane = make_lane
        self._start = 0
        self.connections_max = connections_max
        self.origin_max = min(origin_max, connections_max)
        self.in_flight = 0
        """Attempts in flight over all endpoints."""
        self.origin_in_flight: collections.Counter[Origin] = collections.Counter()
        self._waiting: collections.OrderedDict[str, Lane[Group]] = collections.OrderedDict()
        """Lanes with records to send held back by connections, first come first."""
        self._origin_rate: dict[Origin, float] = {}
        """Per origin, its answers per second while busy (a running figure)."""
        self._origin_window: dict[Origin, tuple[int, float]] = {}
        """Per origin, answers counted in the current window, and when it began."""
        self._held: collections.Counter[Origin] = collections.Counter()
        """Per origin, records leased ahead and not yet sent, and those leases under way
        may bring: at most `_ahead_cap` (else thousands of endpoints leasing a few each
        hold more than the origin sends before their leases run out)."""
        self._lease_waiting: collections.OrderedDict[str, Lane[Group]] = collections.OrderedDict()
        """Lanes that would lease but their origin holds its cap: first come first."""
        self._queued: collections.Counter[Origin] = collections.Counter()
        """Per origin, the lanes in `_waiting`."""
        self._busy: collections.defaultdict[Origin, set[str]] = collections.defaultdict(set)
        """Per origin, the endpoints with records leased or in flight (as of their last
        plan): they share the origin's connections."""

    def _room(self, lane: Lane[Group]) -> int:
        """Attempts the lane may start now: its own budget, its origin's, all's."""
        room = lane.endpoint.settings.max_in_flight - lane.in_flight
        if lane.breaker.state is BreakerState.HALF_OPEN:
            room = min(room, 1 - lane.in_flight)
        shared = min(
            self.origin_max - self.origin_in_flight[lane.origin],
            self.connections_max - self.in_flight,
        )
        return min(room, shared)

    def plan(
        self,
        now_ms: int,
        endpoints: Iterable[Endpoint],
        groups_with_work: Callable[[Endpoint], list[Group]],
    ) -> Plan[Group]:
        """What to start now for `endpoints` (those with something to do: the others'
        lanes are left as they are, so a plan costs the endpoints given, not all)."""
        lanes = self._sync(endpoints)
        plan: Plan[Group] = Plan([], [], [])
        for lane in lanes:
            settings = lane.endpoint.settings
            if not settings.enabled or not lane.breaker.allows(now_ms):
                self._held[lane.origin] -= len(lane.ahead)
                plan.releases.extend(lane.ahead)
                lane.ahead.clear()
                continue
            room = self._room(lane)
            if self._queued[lane.origin] and not lane.handed:
                room = min(room, 0)  # others wait for the origin's connections: queue too
            handed, lane.handed = lane.handed, False
            while room > 0 and lane.ahead:
                self._count(lane, 1)
                room -= 1
                self._held[lane.origin] -= 1
                plan.sends.append(Send(lane, lane.ahead.popleft()))
            if lane.ahead and room <= 0 and lane.in_flight < settings.max_in_flight:
                self._wait(lane, first=handed)  # held back by shared connections
            target = lane.ahead_target(*self._share(lane))
            if lane.leasing or len(lane.ahead) * 2 > target or room < 0:
                continue
            if lane.breaker.state is BreakerState.HALF_OPEN and lane.in_flight:
                continue  # the probe is out: nothing to lease for until it answers
            groups = groups_with_work(lane.endpoint)
            if not groups:
                continue
            probing = lane.breaker.state is BreakerState.HALF_OPEN
            size = (
                1 if probing else min(target - len(lane.ahead), limits.delivery_lease_records_max)
            )
            cap_room = self._ahead_cap(lane.origin) - self._held[lane.origin]
            if cap_room <= 0 and not probing:
                self._lease_waiting[lane.endpoint.name] = lane  # its origin holds enough
                continue
            self._lease_waiting.pop(lane.endpoint.name, None)
            size = max(1, min(size, cap_room))
            group = groups[lane.next_group % len(groups)]
            lane.next_group += 1
            lane.leasing = True
            lane.reserved = size
            self._held[lane.origin] += size
            plan.leases.append(Lease(lane, group, size))
            self._busy[lane.origin].add(lane.endpoint.name)
        for lane in lanes:
            if not (lane.ahead or lane.in_flight or lane.leasing):
                self._busy[lane.origin].discard(lane.endpoint.name)
        return plan

    def _ahead_cap(self, origin: Origin) -> int:
        """Records an origin's endpoints may hold leased ahead together: AHEAD_CAP_S of
        its answers once known (at least its connections' worth), twice its
        connections before."""
        rate = self._origin_rate.get(origin)
        if rate is None:
            return 2 * self.origin_max
        return max(self.origin_max, round(rate * AHEAD_CAP_S))

    def _share(self, lane: Lane[Group]) -> tuple[float, float | None]:
        """What the lane may count on of its origin: its connections, and its answers
        per second once known, each over the endpoints busy on it (itself included)."""
        busy = self._busy[lane.origin]
        sharing = len(busy) + (lane.endpoint.name not in busy)
        rate = self._origin_rate.get(lane.origin)
        return self.origin_max / sharing, None if rate is None else rate / sharing

    def _sync(self, endpoints: Iterable[Endpoint]) -> list[Lane[Group]]:
        """A lane per endpoint (made or updated), in this plan's round-robin order."""
        lanes = []
        for endpoint in endpoints:
            lane = self.lanes.get(endpoint.name)
            if lane is None:
                lane = self.lanes[endpoint.name] = self._make_lane(endpoint)
            elif lane.endpoint is not endpoint:
                lane.update(endpoint)
            lanes.append(lane)
        if lanes:
            self._start = (self._start + 1) % len(lanes)
            lanes = lanes[self._start :] + lanes[: self._start]
        return lanes

    def forget(self, name: str) -> Lane[Group] | None:
        """The endpoint was deleted: its lane, dropped (its records leased ahead are the
        caller's to give back), or None if it had none. Its attempts in flight still
        end (`ended`), freeing their connections."""
        lane = self.lanes.pop(name, None)
        if lane is not None:
            self._busy[lane.origin].discard(name)
            self._held[lane.origin] -= len(lane.ahead) + lane.reserved
            self._lease_waiting.pop(name, None)
            if self._waiting.pop(name, None) is not None:
                self._queued[lane.origin] -= 1
        return lane

    def _count(self, lane: Lane[Group], change: int) -> None:
        lane.in_flight += change
        self.in_flight += change
        self.origin_in_flight[lane.origin] += change
        if not self.origin_in_flight[lane.origin]:
            del self.origin_in_flight[lane.origin]

    def _wait(self, lane: Lane[Group], first: bool = False) -> None:
        """Queue the lane for its origin's connections (at the front when it was
        handed one that another took first)."""
        name = lane.endpoint.name
        if not lane.waiting:
            lane.waiting = True
            self._waiting[name] = lane
            self._queued[lane.origin] += 1
        if first:
            self._waiting.move_to_end(name, last=False)

    def _next_waiting(self) -> list[Lane[Group]]:
        """The lane to plan again now that a connection is free: the first waiting
        (first come, first served) that has room now, handed the connection; none if
        none has. Lanes held back by another origin's connections go to the back; at
        most WAITING_LOOKS are looked at, so ending an attempt costs little however
        many wait."""
        waiting = self._waiting
        for _ in range(min(len(waiting), WAITING_LOOKS)):
            name, lane = waiting.popitem(last=False)
            if self.lanes.get(name) is not lane or not lane.ahead:
                self._unqueue(lane)  # gone, or nothing left to send
                continue
            if self._room(lane) > 0:
                self._unqueue(lane)
                lane.handed = True
                return [lane]
            waiting[name] = lane
        return []

    def _unqueue(self, lane: Lane[Group]) -> None:
        lane.waiting = False
        self._queued[lane.origin] -= 1
        if not self._queued[lane.origin]:
            del self._queued[lane.origin]

    def leased(
        self, lane: Lane[Group], group: Group, jobs: list[Job], asked_at_ms: int
    ) -> list[Ahead[Group]]:
        """A lease asked for at `asked_at_ms` came back with `jobs`; the records to
        give back at once (the endpoint was deleted meanwhile), if any."""
        lane.leasing = False
        until = asked_at_ms + lane.endpoint.lease_ms
        fetched = [Ahead(group, job, until) for job in jobs]
        if self.lanes.get(lane.endpoint.name) is not lane:
            return fetched  # forgotten: its reservation went with it
        self._held[lane.origin] += len(fetched) - lane.reserved
        lane.reserved = 0
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
            and now_ms + settings.timeout_ms + limits.delivery_send_margin_ms
            <= send.ahead.lease_until_ms
        )

    @staticmethod
    def started(lane: Lane[Group]) -> bool:
        """The attempt is being sent; whether it is the breaker's probe."""
        return lane.breaker.started()

    def ended(
        self,
        lane: Lane[Group],
        failed: bool | None,
        now_ms: int,
        probe: bool,
        latency_ms: float | None = None,
    ) -> list[Lane[Group]]:
        """An attempt is over (its answer came, or it never went: `failed` None, its
        record given back): its slot is free. Its settling may still be under way.
        Returns the lanes that were waiting for that connection: plan them again."""
        self._count(lane, -1)
        if failed is not None:
            lane.breaker.ended(failed, now_ms, probe)
        if latency_ms is not None:
            lane.answered(latency_ms, now_ms)
            self._origin_answered(lane.origin, now_ms)
        handed = self._next_waiting() if self._waiting else []
        if self._lease_waiting:
            handed.extend(self._next_leasing())
        return handed

    def _next_leasing(self) -> list[Lane[Group]]:
        """Lanes waiting to lease whose origin has room under its cap again: the first
        few (first come, first served)."""
        handed: list[Lane[Group]] = []
        waiting = self._lease_waiting
        for _ in range(min(len(waiting), WAITING_LOOKS)):
            name, lane = waiting.popitem(last=False)
            if self.lanes.get(name) is not lane:
                continue
            if self._held[lane.origin] >= self._ahead_cap(lane.origin):
                waiting[name] = lane
                waiting.move_to_end(name, last=False)
                break
            handed.append(lane)
            if len(handed) >= LEASE_HANDS:
                break
        return handed

    def _origin_answered(self, origin: Origin, now_ms: float) -> None:
        """Count an answer of `origin`: its pace is measured over windows of
        RATE_WINDOW_MS (the gaps between single answers, often 0 ms apart, made too
        restless a figure), each window's rate weighed into a running one."""
        count, since = self._origin_window.get(origin, (0, now_ms))
        count += 1
        elapsed = now_ms - since
        if elapsed < RATE_WINDOW_MS:
            self._origin_window[origin] = (count, since)
            return
        self._origin_window[origin] = (0, now_ms)
        if elapsed > BUSY_GAP_MS:
            return  # a pause, not its pace
        rate = count * 1000 / elapsed
        known = self._origin_rate.get(origin)
        self._origin_rate[origin] = rate if known is None else known + RATE_WEIGHT * (rate - known)
