"""What /metrics shows of delivery at any number of endpoints (SPEC §7: metrics per
endpoint bounded).

Every endpoint counts in aggregates that carry no endpoint label: attempts by outcome
and by status, their latency, attempts in flight, the backlog, endpoints by state and
by breaker state. Series of their own (brook_delivery_*{endpoint}) go only to the
endpoints failing now and to those an operator chose (`metrics_endpoints`: names or
glob patterns), failing ones first, at most limits.metrics_endpoints_shown_max, and
brook_queue_* of at most limits.metrics_endpoint_groups_shown_max of their queue
groups: a mass failure cannot blow up a scrape.

A scrape walks the endpoints once, reading what the delivery loop keeps of each in
memory (its breaker, when its attempts began failing, attempts in flight) and its
queue groups' backlog; the attempt counters are totals kept as attempts end
(stats.Totals). Nothing is listed, sorted or built for an idle endpoint.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from brook import names
from brook.delivery import endpoint as ep
from brook.delivery.breaker import State as Breaker
from brook.delivery.service import Deliverer, Runtime
from brook.errors import BadRequest
from brook.models import Failure
from brook.queue.shell import backlog_of
from brook.records import DeliverySummary

BY_HAND = "disabled by hand"
"""The reason an endpoint disabled by an operator carries (endpoint.merge and
EndpointStore.set_enabled write it); any other reason is a failure's (a 410, or
`disable_after_ms` of failing attempts)."""
STATES = ("healthy", "failing", "disabled")


class Chosen:
    """The endpoints an operator chose to have series of their own: names, or glob
    patterns of them (`customer-*`)."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        """Raises BadRequest for a pattern that is no endpoint name or glob of them."""
        if isinstance(patterns, str):
            raise BadRequest("metrics_endpoints is a list of endpoint names or glob patterns")
        given = list(patterns)
        for pattern in given:
            if not isinstance(pattern, str) or not names.PATTERN.fullmatch(pattern):
                raise BadRequest(
                    f"metrics_endpoints: {pattern!r} is no endpoint name or glob pattern "
                    "(1 to 200 of A-Z a-z 0-9 . _ - and * ? [ ] !)"
                )
        self.patterns = tuple(given)
        self._names = frozenset(p for p in given if not names.is_glob(p))
        globs = [fnmatch.translate(p) for p in given if names.is_glob(p)]
        self._globs = re.compile("|".join(globs)) if globs else None

    def __contains__(self, name: str) -> bool:
        return name in self._names or (self._globs is not None and bool(self._globs.match(name)))


def shown(failing: list[str], chosen: list[str], shown_max: int) -> tuple[list[str], int]:
    """The endpoints given series of their own, failing ones first, each part by name,
    at most `shown_max`; and how many were left out. `chosen` holds none of `failing`."""
    picked = sorted(failing)[:shown_max]
    picked += sorted(chosen)[: shown_max - len(picked)]
    return picked, len(failing) + len(chosen) - len(picked)


def failing_work(isolated: Iterable[Failure]) -> set[str]:
    """The endpoints whose own work (a dead letter not stored, leasing, settling) fails
    now, from the supervisor's failing subjects: an endpoint's, or its queue groups'."""
    found = set()
    prefix = ep.subject("")
    marker = "/" + ep.GROUP_PREFIX
    for failure in isolated:
        subject = failure.subject or ""
        if subject.startswith(prefix):
            found.add(subject.removeprefix(prefix))
        elif marker in subject:
            found.add(subject.rpartition(marker)[2])
    return found


def failing_now(deliverer: Deliverer) -> set[str]:
    """Every endpoint failing now, as `summary` counts them (the dashboard's filter)."""
    troubled = failing_work(deliverer.core.supervisor.isolated())
    lanes = deliverer.scheduler.lanes
    return {
        endpoint.name
        for endpoint in deliverer.store.every()
        if _failing(endpoint, lanes.get(endpoint.name), troubled)
    }


def _failing(endpoint: ep.Endpoint, lane: object, troubled: set[str]) -> bool:
    """Enabled and its breaker not closed, its attempts failing or its own work failing;
    or disabled by a failure (a 410, disable_after_ms) rather than by hand."""
    if isinstance(lane, Runtime):
        breaker, since = lane.breaker.state, lane.stats.failing_since_ms
    else:  # not looked at by the loop yet (just made, or the broker just started)
        breaker, since = Breaker.CLOSED, endpoint.failing_since_ms
    if not endpoint.settings.enabled:
        return endpoint.disabled_reason != BY_HAND or endpoint.name in troubled
    return breaker is not Breaker.CLOSED or since is not None or endpoint.name in troubled


def summary(
    deliverer: Deliverer, chosen: Chosen, shown_max: int, groups_max: int
) -> DeliverySummary:
    """Delivery over every endpoint as it stands (any thread; a racy look, as a scrape's
    is), with at most `shown_max` endpoints and `groups_max` of their queue groups to
    show on their own."""
    store = deliverer.store
    lanes = deliverer.scheduler.lanes
    troubled = failing_work(deliverer.core.supervisor.isolated())
    states = dict.fromkeys(STATES, 0)
    open_, half_open = Breaker.OPEN, Breaker.HALF_OPEN
    opened = probing = in_flight = 0
    failing: list[str] = []
    picked: list[str] = []
    for endpoint in store.every():
        name = endpoint.name
        lane = lanes.get(name)
        if isinstance(lane, Runtime):  # (none yet: just made, or the broker just started)
            breaker = lane.breaker.state
            # By identity: an Enum's hash is Python code, 10,000 of them a scrape.
            if breaker is open_:
                opened += 1
            elif breaker is half_open:
                probing += 1
            in_flight += lane.in_flight
        bad = _failing(endpoint, lane, troubled)
        if not endpoint.settings.enabled:
            states["disabled"] += 1
        else:
            states["failing" if bad else "healthy"] += 1
        if bad:
            failing.append(name)
        elif name in chosen:
            picked.append(name)
    attempts, statuses, latency = deliverer.totals.snapshot()
    names_shown, left_out = shown(failing, picked, shown_max)
    groups: list[tuple[str, str]] = []
    for name in names_shown:
        found = store.find(name)
        if found is not None and len(groups) < groups_max:
            own = sorted((group.topic, group.group) for group in store.groups(found))
            groups += own[: groups_max - len(groups)]
    return DeliverySummary(
        attempts=attempts,
        statuses=statuses,
        latency_s=latency,
        in_flight=in_flight,
        backlog=backlog_of(store.every_group()),
        endpoints=states,
        breakers={
            Breaker.CLOSED.value: sum(states.values()) - opened - probing,
            open_.value: opened,
            half_open.value: probing,
        },
        shown=names_shown,
        left_out=left_out,
        shown_groups=groups,
    )
