"""A seeded simulation of delivery: the scheduler, breakers, pacing and verdicts the
broker runs, over the queue groups' own state machines, with a fake clock and
endpoints that behave at random (healthy, failing, hanging, flapping, rate
limiting with Retry-After, refusing some records, going away with 410).

Checked: every record ends acked or dead exactly once; no record is sent more than
max_attempts times; no endpoint is sent more than its rate in any second, nor more
than its in-flight budget, nor anything while its breaker is open or it is
disabled; no lease runs out under an attempt; a healthy endpoint's records are
delivered as fast as if it were alone; and after an outage, records new since are
not made to wait behind the backlog of retries. Set BROOK_SEED to replay; the seed
is printed.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import itertools
import os
import random
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from brook.delivery import endpoint as ep
from brook.delivery.outcome import Action, ErrorKind, Result, judge
from brook.delivery.scheduler import AHEAD_S, Ahead, Lane, Scheduler, Send
from brook.errors import LeaseExpired
from brook.models import Backoff, State
from brook.queue.group import Change, GroupCore, Position
from brook.queue.lifecycle import Settings
from brook.records import Job, Record

BACKOFF = Backoff(min_ms=100, factor=2.0, max_ms=2_000, jitter=0.5)
IDLE_MS = 500  # as the loop: with nothing to do it looks again this often
LEASE_MS = 2  # a lease (one durable write) takes this long


def seed_of(name: str) -> int:
    seed = int(os.environ.get("BROOK_SEED", random.randrange(2**32)))
    print(f"delivery simulation seed: {seed} ({name}; replay with BROOK_SEED={seed})")
    return seed


class SimGroup:
    """One (endpoint, topic) queue group: the group's own state machine."""

    def __init__(self, endpoint: ep.Endpoint, topic: str, rng: random.Random) -> None:
        self.endpoint_name = endpoint.name
        self.topic = topic
        self.core = GroupCore(
            Settings(
                visibility_timeout_ms=endpoint.lease_ms,
                max_attempts=endpoint.settings.max_attempts,
                backoff=endpoint.settings.backoff,
                expire_after_ms=endpoint.settings.expire_after_ms,
                ordering=endpoint.settings.ordering,
            ),
            rng,
        )
        self.ended: Counter[Position] = Counter()
        self.appended_ms: dict[Position, int] = {}
        self.first_sent_ms: dict[Position, int] = {}
        self.ended_ms: dict[Position, int] = {}

    def note(self, changes: list[Change], now: int) -> None:
        for position, transition in changes:
            if transition.state in (State.ACKED, State.DEAD):
                self.ended[position] += 1
                self.ended_ms[position] = now

    def has_work(self, now: int) -> bool:
        due = self.core.next_due_ms()
        return self.core.has_ready() or (due is not None and due <= now)


Behaviour = Callable[[int, Position], tuple[int, Result]]
"""(now, record) -> (latency in ms, what the endpoint answers)."""


def ok(rng: random.Random, low: int = 5, high: int = 30) -> Behaviour:
    return lambda now, position: (rng.randint(low, high), Result(status=200))


def failing(rng: random.Random) -> Behaviour:
    return lambda now, position: (rng.randint(1, 10), Result(status=500))


def hanging_until(rng: random.Random, up_at_ms: int) -> Behaviour:
    """No answer at all (each attempt times out) until `up_at_ms`, then healthy."""
    return lambda now, position: (
        10**9 if now < up_at_ms else rng.randint(5, 20),
        Result(status=200),
    )


def flapping(rng: random.Random, period_ms: int) -> Behaviour:
    def answer(now: int, position: Position) -> tuple[int, Result]:
        up = (now // period_ms) % 2 == 0
        return rng.randint(5, 20), Result(status=200 if up else 503)

    return answer


def limiting(rng: random.Random) -> Behaviour:
    def answer(now: int, position: Position) -> tuple[int, Result]:
        if rng.random() < 0.3:
            return rng.randint(1, 5), Result(status=429, retry_after="1")
        return rng.randint(5, 20), Result(status=200)

    return answer


def picky(rng: random.Random) -> Behaviour:
    def answer(now: int, position: Position) -> tuple[int, Result]:
        if position[1] % 10 == 3:
            return rng.randint(1, 5), Result(status=422)
        return rng.randint(5, 40), Result(status=200 if rng.random() < 0.8 else 502)

    return answer


def gone_once(rng: random.Random, at_ms: int) -> Behaviour:
    said = [False]

    def answer(now: int, position: Position) -> tuple[int, Result]:
        if now >= at_ms and not said[0]:
            said[0] = True
            return 3, Result(status=410)
        return rng.randint(5, 20), Result(status=200)

    return answer


def down_until(rng: random.Random, up_at_ms: int) -> Behaviour:
    def answer(now: int, position: Position) -> tuple[int, Result]:
        return rng.randint(5, 15), Result(status=200 if now >= up_at_ms else 500)

    return answer


@dataclass
class Simulation:
    seed: int
    now: int = 0
    events: list[tuple[int, int, Callable[[], None]]] = field(default_factory=list)
    serial: itertools.count[int] = field(default_factory=itertools.count)
    endpoints: dict[str, ep.Endpoint] = field(default_factory=dict)
    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    groups: dict[str, list[SimGroup]] = field(default_factory=dict)
    scheduler: Scheduler[SimGroup] = field(default_factory=Scheduler)
    sends: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    sent: Counter[tuple[str, str, Position]] = field(default_factory=Counter)
    round_due: int | None = None
    expired_under_attempt: int = 0
    reenable_after_ms: int = 3_000

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.offsets: Counter[str] = Counter()
        self.coming = 0
        """Appends scheduled and not yet made."""

    # -------------------------------------------------------------- setup

    def add_endpoint(
        self,
        name: str,
        behaviour: Behaviour,
        topics: list[str],
        origin: str | None = None,
        **settings: object,
    ) -> None:
        url = f"https://{origin or name + '.example'}/{name}"
        endpoint = ep.Endpoint(
            name=name,
            settings=ep.Settings(url=url, topics=topics, **settings),  # type: ignore[arg-type]
            secrets=(ep.Secret("whsec_c2ltdWxhdGlvbg=="),),
            created_ms=0,
        )
        self.endpoints[name] = endpoint
        self.behaviours[name] = behaviour
        self.groups[name] = [
            SimGroup(endpoint, t, random.Random(self.rng.random())) for t in topics
        ]

    def append_at(self, when: int, topic: str, key: str | None) -> None:
        self.coming += 1
        self.at(when, lambda: self.append(topic, key))

    def append(self, topic: str, key: str | None) -> None:
        """A record appended to `topic`: offered to every group on it (partition 0)."""
        self.coming = max(0, self.coming - 1)
        offset = self.offsets[topic]
        self.offsets[topic] += 1
        for groups in self.groups.values():
            for group in groups:
                if group.topic == topic:
                    group.core.offer((0, offset), key, self.now)
                    group.appended_ms[(0, offset)] = self.now
        self.wake()

    # -------------------------------------------------------------- the clock

    def at(self, when: int, action: Callable[[], None]) -> None:
        heapq.heappush(self.events, (when, next(self.serial), action))

    def tell(self, lanes: list[Lane[SimGroup]]) -> None:
        """Lanes handed back by the scheduler (a connection freed for them)."""
        if lanes:
            self.wake()

    def wake(self) -> None:
        if self.round_due is None or self.round_due > self.now:
            self.round_due = self.now
            self.at(self.now, self.round)

    def run(self, until_ms: int) -> None:
        self.wake()
        while self.events and not self.finished():
            when, _, action = heapq.heappop(self.events)
            assert when >= self.now
            self.now = when
            if self.now > until_ms:
                raise AssertionError(f"delivery did not finish by {until_ms} ms (seed {self.seed})")
            action()

    def finished(self) -> bool:
        return not self.coming and all(
            len(group.ended) == self.offsets[group.topic]
            for groups in self.groups.values()
            for group in groups
        )

    # -------------------------------------------------------------- the loop

    def round(self) -> None:
        if self.round_due != self.now:
            return  # a later wake-up replaced this one
        self.round_due = None
        plan = self.scheduler.plan(
            self.now,
            list(self.endpoints.values()),
            lambda endpoint: [g for g in self.groups[endpoint.name] if g.has_work(self.now)],
        )
        self.release(plan.releases)
        for send in plan.sends:
            self.at(self.now, functools.partial(self.try_send, send))
        for lease in plan.leases:
            asked = self.now

            def leased(lease=lease, asked=asked) -> None:  # type: ignore[no-untyped-def]
                changes = lease.group.core.lease(self.now, lease.size)
                lease.group.note(changes, self.now)
                jobs = [
                    Job(
                        Record(b"", topic=lease.group.topic, partition=p[0], offset=p[1]),
                        t.attempt,
                        t.receipt,
                    )
                    for p, t in changes
                    if t.state is State.LEASED and t.receipt is not None
                ]
                self.release(self.scheduler.leased(lease.lane, lease.group, jobs, asked))
                self.wake()

            self.at(self.now + LEASE_MS, leased)
        probes = [
            lane.breaker.next_probe_ms()
            for lane in self.scheduler.lanes.values()
            if lane.breaker.next_probe_ms() is not None
        ]
        self.at(min([self.now + IDLE_MS, *[p for p in probes if p is not None]]), self.wake_later)

    def wake_later(self) -> None:
        self.wake()

    def release(self, unsent: list[Ahead[SimGroup]]) -> None:
        for ahead in unsent:
            with contextlib.suppress(LeaseExpired):  # ran out meanwhile: ready already
                ahead.group.note(
                    ahead.group.core.settle(self.now, ahead.job.receipt, "release"), self.now
                )

    def try_send(self, send: Send[SimGroup]) -> None:
        lane, (group, job, _) = send.lane, send.ahead
        wait = Scheduler.pace(lane, self.now)
        if wait > 0:
            self.at(self.now + int(wait + 0.999), lambda: self.try_send(send))
            return
        if not Scheduler.sendable(send, self.now):
            self.release([send.ahead])
            self.tell(self.scheduler.ended(lane, None, self.now, False))
            self.wake()
            return
        endpoint = self.endpoints[lane.endpoint.name]
        settings = endpoint.settings
        position = (job.record.partition, job.record.offset)
        assert settings.enabled, f"sent to disabled {endpoint.name} (seed {self.seed})"
        assert lane.breaker.allows(self.now), (
            f"sent to {endpoint.name} through an open breaker, or beside its probe (seed {self.seed})"
        )
        assert lane.in_flight <= settings.max_in_flight, (
            f"{endpoint.name} over its budget (seed {self.seed})"
        )
        probe = Scheduler.started(lane)
        self.sends[endpoint.name].append(self.now)
        self.sent[(endpoint.name, group.topic, position)] += 1
        group.first_sent_ms.setdefault(position, self.now)
        latency, result = self.behaviours[endpoint.name](self.now, position)
        if latency >= settings.timeout_ms:
            latency, result = (
                settings.timeout_ms,
                Result(error=ErrorKind.TIMEOUT, latency_ms=settings.timeout_ms),
            )
        result = msgspec.structs.replace(result, latency_ms=float(latency))
        self.at(self.now + latency, lambda: self.answered(lane, group, job, result, probe))

    def answered(
        self, lane: Lane[SimGroup], group: SimGroup, job: Job, result: Result, probe: bool
    ) -> None:
        endpoint = self.endpoints[lane.endpoint.name]
        verdict = judge(result, job.attempt, endpoint.settings.backoff, self.now, self.rng)
        core = group.core
        try:
            if verdict.action is Action.ACK:
                changes = core.settle(self.now, job.receipt, "ack")
            elif verdict.action is Action.DEAD:
                changes = core.settle(self.now, job.receipt, "discard", verdict.reason)
            elif verdict.action is Action.RETRY:
                changes = core.settle(
                    self.now, job.receipt, "nack", verdict.reason, verdict.delay_ms
                )
            else:
                changes = core.settle(self.now, job.receipt, "nack", verdict.reason, 0)
                self.set_enabled(endpoint.name, False)
                self.at(
                    self.now + self.reenable_after_ms, lambda: self.set_enabled(endpoint.name, True)
                )
            group.note(changes, self.now)
        except LeaseExpired:
            self.expired_under_attempt += 1
        self.tell(
            self.scheduler.ended(
                lane, verdict.action is Action.RETRY, self.now, probe, result.latency_ms
            )
        )
        self.wake()

    def set_enabled(self, name: str, enabled: bool) -> None:
        endpoint = self.endpoints[name]
        settings = msgspec.structs.replace(endpoint.settings, enabled=enabled)
        self.endpoints[name] = msgspec.structs.replace(endpoint, settings=settings)
        if not enabled:  # as the loop does on a 410: its lane knows at once
            self.scheduler.lanes[name].update(self.endpoints[name])
        self.wake()

    # -------------------------------------------------------------- checks

    def check(self) -> None:
        seed = self.seed
        assert self.expired_under_attempt == 0, f"a lease ran out under an attempt (seed {seed})"
        for name, groups in self.groups.items():
            settings = self.endpoints[name].settings
            for group in groups:
                total = self.offsets[group.topic]
                assert len(group.ended) == total, f"{name} lost records (seed {seed})"
                assert set(group.ended.values()) == {1}, (
                    f"{name}: a record ended twice (seed {seed})"
                )
                assert group.core.live == 0
                counts = group.core.stats()
                assert counts["acked"] + counts["dead"] == total
            tried = [n for (endpoint, _, _), n in self.sent.items() if endpoint == name]
            assert max(tried, default=0) <= settings.max_attempts, (
                f"{name}: a record was sent {max(tried)} times, max_attempts is "
                f"{settings.max_attempts} (seed {seed})"
            )
            rate = settings.rate_limit_per_s
            if rate is not None:
                times = self.sends[name]
                for i, start in enumerate(times):
                    within = sum(1 for t in times[i : i + rate * 2 + 2] if t < start + 1000)
                    assert within <= rate * 1.05, (
                        f"{name}: {within} sends in the second from {start} ms, rate {rate} (seed {seed})"
                    )


def mixed(seed: int, solo: bool = False) -> Simulation:
    """The endpoints and records of one seed; `solo`: the healthy endpoint alone."""
    sim = Simulation(seed)
    rng = random.Random(seed + 1)
    own = itertools.count(seed + 2)  # each endpoint its own dice: solo or not, the same answers
    fast = dict(max_in_flight=rng.choice([4, 16]), timeout_ms=1_000, backoff=BACKOFF)
    hang_ms = rng.randrange(2_000, 30_000)
    flap_ms, rate, gone_at = (
        rng.choice([700, 2_000, 6_000]),
        rng.choice([5, 20, 50]),
        rng.randrange(500, 5_000),
    )
    sim.add_endpoint("healthy", ok(random.Random(next(own))), ["orders", "users"], **fast)
    if not solo:
        sim.add_endpoint(
            # Never up: its breaker keeps it to a probe a while, and its records die
            # of old age (or of their attempts).
            "failing",
            failing(random.Random(next(own))),
            ["orders"],
            max_attempts=4,
            expire_after_ms=20_000,
            **fast,
        )
        sim.add_endpoint(
            "hanging",
            hanging_until(random.Random(next(own)), hang_ms),
            ["orders", "users"],
            max_attempts=8,
            **fast,
        )
        sim.add_endpoint(
            "flapping", flapping(random.Random(next(own)), flap_ms), ["orders"], **fast
        )
        sim.add_endpoint(
            "limited", limiting(random.Random(next(own))), ["users"], rate_limit_per_s=rate, **fast
        )
        sim.add_endpoint(
            "picky", picky(random.Random(next(own))), ["orders"], ordering="key", **fast
        )
        sim.add_endpoint("gone", gone_once(random.Random(next(own)), gone_at), ["users"], **fast)
        sim.add_endpoint(
            "expiring",
            failing(random.Random(next(own))),
            ["users"],
            max_attempts=50,
            expire_after_ms=3_000,
            **fast,
        )
    keys = [None, "a", "b", "c", "d", "e"]
    when = 0
    for _ in range(rng.randrange(300, 600)):
        when += rng.choice([0, 0, 1, 5, 20])
        topic, key = rng.choice(["orders", "users"]), rng.choice(keys)
        sim.append_at(when, topic, key)
    sim.run(until_ms=600_000)
    sim.check()
    return sim


def healthy_waits(sim: Simulation) -> list[int]:
    """How long each of the healthy endpoint's records waited for its first attempt."""
    return sorted(
        group.first_sent_ms[p] - group.appended_ms[p]
        for group in sim.groups["healthy"]
        for p in group.appended_ms
    )


def test_a_random_mix_of_endpoints_ends_every_record_exactly_once() -> None:
    seed = seed_of("mixed endpoints")
    together, alone = mixed(seed), mixed(seed, solo=True)
    assert all(n == 1 for (e, _, _), n in together.sent.items() if e == "healthy")
    # The healthy endpoint's records never waited on the others: as soon with seven
    # failing, hanging, flapping, limited and disabled neighbours as alone.
    mixed_waits, solo_waits = healthy_waits(together), healthy_waits(alone)
    assert mixed_waits[-1] <= solo_waits[-1] * 1.1 + 50, (
        f"the healthy endpoint's longest wait was {mixed_waits[-1]} ms beside the others, "
        f"{solo_waits[-1]} ms alone (seed {seed})"
    )
    median = len(mixed_waits) // 2
    assert mixed_waits[median] <= solo_waits[median] * 1.1 + 20, f"seed {seed}"


def test_new_records_are_not_held_behind_a_backlog_of_retries() -> None:
    """An endpoint that can take 100 records/s has 3,000 retries due (after an
    outage) while 20 new records/s arrive: the new ones take turns with the
    backlog instead of waiting the 30 s it takes to drain."""
    seed = seed_of("retry backlog")
    sim = Simulation(seed)
    sim.add_endpoint(
        "recovering",
        ok(random.Random(seed + 1)),
        ["events"],
        max_in_flight=8,
        timeout_ms=1_000,
        rate_limit_per_s=100,
    )
    (group,) = sim.groups["recovering"]
    backlog = 3_000
    for _ in range(backlog):
        sim.append("events", None)
    for _, transition in group.core.lease(0, backlog):  # the outage's failed attempts
        assert transition.receipt is not None
        group.core.settle(0, transition.receipt, "nack", "503", 0)
    first_new = sim.offsets["events"]
    for n in range(200):
        sim.append_at(n * 50, "events", None)
    sim.run(until_ms=300_000)
    sim.check()
    drained = max(group.ended_ms.values())
    assert drained >= backlog / 100 * 1000 * 0.95, "the backlog drained faster than the rate"
    new = [(0, offset) for offset in range(first_new, first_new + 200)]
    waits = [group.first_sent_ms[p] - group.appended_ms[p] for p in new]
    # It waits behind what was leased ahead (a second of the endpoint's pace), not more.
    limit = AHEAD_S * 1000 * 2
    assert max(waits) < limit, f"a new record waited {max(waits)} ms behind retries (seed {seed})"


def test_endpoints_sharing_an_origin_share_its_connections_and_all_finish() -> None:
    """Forty endpoints on one origin of 8 connections (and 12 in all, beside one endpoint
    on an origin of its own): never more in flight than the caps, every record of
    each ended exactly once, none waiting for ever, the lone endpoint's pace its own."""
    seed = seed_of("shared origin")
    sim = Simulation(seed, scheduler=Scheduler(connections_max=12, origin_max=8))
    rng = random.Random(seed + 1)
    for n in range(40):
        sim.add_endpoint(
            f"tenant{n}",
            ok(random.Random(rng.random())),
            ["orders"],
            origin="hooks.example",
            max_in_flight=4,
            timeout_ms=1_000,
        )
    sim.add_endpoint("own", ok(random.Random(rng.random())), ["orders"], timeout_ms=1_000)
    peaks: Counter[str] = Counter()
    real_try_send = sim.try_send

    def try_send(send: Send[SimGroup]) -> None:
        real_try_send(send)
        scheduler = sim.scheduler
        assert scheduler.in_flight <= 12, f"seed {seed}"
        for origin, count in scheduler.origin_in_flight.items():
            assert count <= 8, f"{origin}: {count} in flight (seed {seed})"
            peaks[origin[1]] = max(peaks[origin[1]], count)

    sim.try_send = try_send  # type: ignore[method-assign]
    when = 0
    for _ in range(300):
        when += rng.choice([0, 1, 5])
        sim.append_at(when, "orders", rng.choice([None, "a", "b"]))
    sim.run(until_ms=600_000)
    sim.check()
    assert peaks["hooks.example"] == 8, "the shared origin used all its connections"
