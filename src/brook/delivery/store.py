"""Every endpoint of a broker, stored durably, and their queue groups kept in step.

An endpoint is a file (`endpoints/<name>.json`, layout.endpoint) written
atomically; on S3 it is an object, so a fresh machine on the same bucket finds
every endpoint and resumes delivery where the queue groups stand.

Each (endpoint, topic) pair is a queue group named `__endpoint.<name>` on the
topic. Creating an endpoint creates the groups of the topics it matches first
(starting at their end, or at their oldest record with start="earliest") and
writes the endpoint last, so a crash between the two leaves only groups that a
start finds orphaned and deletes. A topic created later gets its groups from the
store's reconciler, a thread of its own, starting at its oldest record: every
record of it came after the endpoint. The reconciler finds a new topic's endpoints
through an index of their patterns (delivery/patterns.py), makes the groups of a
few topics at a time in one call on the writer role (QueueStore.create_groups), and
then tells the delivery loop which endpoints have a new group. The delivery loop
never waits for it, and an endpoint's own change waits at most for one such chunk:
onboarding hundreds of customers' topics stalls nobody (issue 50). The store keeps the
groups indexed by endpoint and by topic, so nothing here costs the number of
endpoints or topics but what a change touches.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from brook import layout, limits, names, side_by_side
from brook.core import Hooks
from brook.delivery import addresses, signing
from brook.delivery import endpoint as ep
from brook.delivery.endpoint import Endpoint
from brook.delivery.patterns import PatternIndex
from brook.errors import BrookError, EndpointNotFound
from brook.names import is_glob, literal_prefix
from brook.queue.shell import QueueGroup

if TYPE_CHECKING:
    from brook.core import Core
    from brook.queue.store import QueueStore

log = logging.getLogger("brook.delivery")


class EndpointStore:
    def __init__(
        self, core: Core, queues: QueueStore, reach: addresses.Reach = addresses.PUBLIC
    ) -> None:
        self.core = core
        self.queues = queues
        self.reach = reach
        """Which addresses besides public ones endpoints may be at (addresses.py)."""
        self._mutex = threading.Lock()
        """Held while endpoints or their groups change (one change at a time)."""
        self._endpoints: dict[str, Endpoint] = {}
        self._groups: dict[str, dict[str, QueueGroup]] = {}
        """Endpoint name -> topic -> its queue group there (an index of the queue store's)."""
        self._by_topic: dict[str, set[str]] = {}
        """Topic -> the endpoints with a group on it."""
        self._patterns = PatternIndex()
        """Endpoint name by its topic patterns: a new topic's endpoints, found at once."""
        self._fresh_topics: dict[str, None] = {}
        """Topics made since they were last reconciled, oldest first: they may need
        endpoints' groups."""
        self._fresh = threading.Condition(threading.Lock())
        self._stop = threading.Event()
        self._reconciler: threading.Thread | None = None
        self.changed: list[Callable[[str | None], None]] = []
        """Called after an endpoint changed, with its name (the delivery loop looks again)."""
        stored = [n for n in core.storage.list(layout.ENDPOINTS) if layout.parse_endpoint(n)]
        side_by_side.each(core.storage, stored, self._read_stored, self._keep_stored)
        for group in queues.groups(named=ep.GROUP_PREFIX):  # users' groups open later
            owner = ep.group_endpoint(group.group)
            if owner is not None:
                self._index(owner, group)
        if not core.read_only:
            self._delete_orphans()
            # Every topic at the first pass: a crash may have left a group unmade.
            self._fresh_topics.update(dict.fromkeys(state.name for state in core.topic_states()))
            core.register(
                Hooks(
                    "endpoints",
                    on_topic_created=self._topic_created,
                    on_topic_deleted=self._topic_deleted,
                )
            )
            self._reconciler = core.supervisor.start(
                "endpoints", self._reconcile_step, self._stop, self._wait_for_topics
            )

    def _read_stored(self, name: str) -> tuple[str, Endpoint] | None:
        """An endpoint stored before this broker opened (None if it went meanwhile)."""
        raw = self.core.storage.read_all(name)
        found = layout.parse_endpoint(name)
        return None if raw is None or found is None else (found, ep.decode(raw))

    def _keep_stored(self, stored: tuple[str, Endpoint] | None) -> None:
        if stored is not None:
            name, endpoint = stored
            self._endpoints[name] = endpoint
            self._patterns.put(name, endpoint.settings.topics)

    # ------------------------------------------------------------ reading

    def get(self, name: str) -> Endpoint:
        """The endpoint; EndpointNotFound."""
        found = self._endpoints.get(name)
        if found is None:
            raise EndpointNotFound(f"no endpoint {name} exists")
        return found

    def find(self, name: str) -> Endpoint | None:
        return self._endpoints.get(name)

    def has_endpoints(self) -> bool:
        return bool(self._endpoints)

    def endpoints(self) -> list[Endpoint]:
        """Every endpoint, by name."""
        return [self._endpoints[name] for name in sorted(self._endpoints)]

    def every(self) -> list[Endpoint]:
        """Every endpoint, in no order (a copy, any thread): a walk that sorts nothing."""
        return list(self._endpoints.values())

    def every_group(self) -> list[QueueGroup]:
        """Every endpoint's queue groups, in no order (a copy, any thread)."""
        return [group for groups in list(self._groups.values()) for group in list(groups.values())]

    def groups(self, endpoint: Endpoint) -> list[QueueGroup]:
        """The endpoint's queue groups, one per topic it delivers from."""
        return list(self._groups.get(endpoint.name, {}).values())

    def group_on(self, endpoint: Endpoint, topic: str) -> QueueGroup | None:
        return self._groups.get(endpoint.name, {}).get(topic)

    def has_endpoints_on(self, topic: str) -> bool:
        return topic in self._by_topic

    def idle_patterns(self, endpoint: Endpoint) -> list[str]:
        """The endpoint's topic patterns that take no topic now (a typo, or topics to come)."""
        taken = list(self._groups.get(endpoint.name, {}))
        return [
            pattern
            for pattern in endpoint.settings.topics
            if not any(names.pattern_matches(pattern, topic) for topic in taken)
        ]

    def delivered_topics(self) -> list[str]:
        """Every topic some endpoint delivers from (a copy)."""
        return list(self._by_topic)

    def endpoints_on(self, topic: str) -> set[str]:
        """The names of the endpoints delivering records of `topic` (a copy, any thread)."""
        found = self._by_topic.get(topic)
        return set(found) if found else set()

    # ------------------------------------------------------------ changing

    def put(self, name: str, given: dict[str, Any]) -> tuple[Endpoint, str | None]:
        """Create the endpoint, or change the settings given; returns it and its new
        secret when one was made or given (to show once). BadRequest, InvalidName."""
        self.core.check_open()
        with self._mutex:
            stored = self._endpoints.get(name)
            endpoint, secret = ep.merge(name, stored, given, self.core.now_ms(), self.reach)
            self._align_groups(endpoint, by_hand=True)
            self._store(endpoint)
        return endpoint, secret

    def delete(self, name: str) -> None:
        """Delete the endpoint and its queue groups (records not yet delivered are
        not delivered). EndpointNotFound."""
        self.core.check_open()
        with self._mutex:
            endpoint = self.get(name)
            # The endpoint first: a crash before its groups are gone leaves orphans that
            # the next start deletes, never an endpoint whose groups are missing (which
            # would be made again from the topics' oldest records).
            self.core.storage.delete(layout.endpoint(name))
            del self._endpoints[name]
            self._patterns.remove(name)
            for group in self.groups(endpoint):
                self.queues.delete_group(group.topic, group.group)
                self._unindex(name, group.topic)
            self._groups.pop(name, None)
            self.core.supervisor.forget_subject(ep.subject(name))
        self._notify(name)

    def set_enabled(self, name: str, enabled: bool, reason: str = "") -> Endpoint:
        """Enable or disable; a disabled endpoint's records wait in its groups."""
        with self._mutex:
            endpoint = self.get(name)
            if endpoint.settings.enabled == enabled and endpoint.disabled_reason == reason:
                return endpoint
            changed = msgspec.structs.replace(
                endpoint,
                settings=msgspec.structs.replace(endpoint.settings, enabled=enabled),
                disabled_reason="" if enabled else (reason or "disabled by hand"),
                # Enabled again: disable_after_ms counts afresh.
                failing_since_ms=None if enabled else endpoint.failing_since_ms,
            )
            self._store(changed)
        if not enabled:
            log.warning("endpoint %s disabled: %s", name, changed.disabled_reason)
        return changed

    def rotate_secret(self, name: str, secret: str | None = None) -> str:
        """A new secret (made, or `secret`); the old one signs too for a day. Returns it."""
        with self._mutex:
            scheme = self.get(name).settings.signature
        new = secret if secret is not None else signing.new_secret(scheme)
        signing.key_of(new)
        with self._mutex:
            endpoint = self.get(name)
            changed = msgspec.structs.replace(
                endpoint, secrets=ep.rotated(endpoint.secrets, new, self.core.now_ms())
            )
            self._store(changed)
        return new

    def note_failing(self, name: str, since_ms: int | None) -> Endpoint:
        """Store when the endpoint began failing (None: it succeeds again)."""
        with self._mutex:
            endpoint = self.get(name)
            if endpoint.failing_since_ms != since_ms:
                endpoint = msgspec.structs.replace(endpoint, failing_since_ms=since_ms)
                self._store(endpoint)
            return endpoint

    def reconcile(self) -> None:
        """Give every topic made so far its endpoints' groups now (the reconciler does it
        on its own; this waits for what is left, for callers that need it done)."""
        while self._reconcile_step() == 0:
            pass

    def stop(self) -> None:
        """Stop the reconciler (before the queue groups and the committer close)."""
        self._stop.set()
        with self._fresh:
            self._fresh.notify_all()
        if self._reconciler is not None:
            self._reconciler.join()

    def close(self) -> None:
        """Nothing held open: endpoints are whole files."""

    # ------------------------------------------------------------ the reconciler

    def _wait_for_topics(self, seconds: float) -> None:
        with self._fresh:
            if not self._fresh_topics and not self._stop.is_set():
                self._fresh.wait(seconds)

    def _reconcile_step(self) -> float:
        """One pass: the groups of up to limits.delivery_reconcile_topics new topics; 0 when more are
        waiting, else how long to wait for the next (woken by a new topic)."""
        if self.core.read_only:
            return limits.delivery_reconcile_idle_s
        with self._fresh:
            topics = list(self._fresh_topics)[: limits.delivery_reconcile_topics]
            for topic in topics:
                del self._fresh_topics[topic]
        if not topics:
            return limits.delivery_reconcile_idle_s
        try:
            told = self._add_groups_for(topics)
        except BaseException:
            with self._fresh:  # looked at again on the next pass (Closed: no pass comes)
                self._fresh_topics.update(dict.fromkeys(topics))
            raise
        for name in told:
            self._notify(name)
        return 0.0 if self._fresh_topics else limits.delivery_reconcile_idle_s

    def _add_groups_for(self, topics: list[str]) -> set[str]:
        """Groups for the endpoints matching `topics` that have none there, from the
        topics' oldest records; the endpoints that got one."""
        supervisor = self.core.supervisor
        with self._mutex:
            wanted: list[tuple[Endpoint, str]] = []
            for topic in topics:
                if not self.core.has_topic(topic):
                    continue
                for name in sorted(self._patterns.candidates(topic)):
                    endpoint = self._endpoints.get(name)
                    if (
                        endpoint is not None
                        and endpoint.matches(topic)
                        and self.group_on(endpoint, topic) is None
                    ):
                        wanted.append((endpoint, topic))
            if not wanted:
                return set()
            made = self.queues.create_groups(
                [(t, e.group(), self._queue_settings(e, t)) for e, t in wanted]
            )
            told = set()
            for (endpoint, _), group in zip(wanted, made, strict=True):
                # The endpoint's failure alone, shown until its groups are made again.
                with supervisor.isolate("delivery", ep.subject(endpoint.name), "topics"):
                    if isinstance(group, BrookError):
                        raise group
                if isinstance(group, BrookError):
                    continue
                self._index(endpoint.name, group)
                told.add(endpoint.name)
        return told

    # ------------------------------------------------------------ inside

    def _align_groups(self, endpoint: Endpoint, by_hand: bool) -> None:
        """Holding the mutex: a group on each topic the endpoint matches, with the
        endpoint's settings; none on the others. A group made when the endpoint is
        created or changed starts where the endpoint's `start` says; one made by
        `reconcile` is for a topic made since, all of whose records are new."""
        name = endpoint.name
        have = dict(self._groups.get(name, {}))
        new: list[tuple[str, str, dict[str, Any]]] = []
        for topic in self._candidates(endpoint):
            if not endpoint.matches(topic):
                continue
            settings = self._queue_settings(endpoint, topic)
            group = have.pop(topic, None)
            if group is None:
                new.append((topic, endpoint.group(), settings))
            elif _differs(group, settings):
                self.queues.group(topic, endpoint.group(), internal=True, **settings)
        if new:  # made together: one call on the writer role, their first entries one round
            start = endpoint.settings.start if by_hand else "earliest"
            failed = None
            for made in self.queues.create_groups(new, start=start):
                if isinstance(made, BrookError):
                    failed = failed or made
                else:
                    self._index(name, made)
            if failed is not None:
                raise failed
        for topic in have:
            self.queues.delete_group(topic, endpoint.group())
            self._unindex(name, topic)

    def _candidates(self, endpoint: Endpoint) -> list[str]:
        """The topics the endpoint could match: those it names, when it names them
        all outright (no look at every topic: bulk creation stays fast); else those
        beginning with one of its patterns' literal parts."""
        patterns = endpoint.settings.topics
        if not any(is_glob(p) for p in patterns):
            return [p for p in patterns if self.core.has_topic(p)]
        return self.core.topics_starting(literal_prefix(p) for p in patterns)

    def _index(self, name: str, group: QueueGroup) -> None:
        self._groups.setdefault(name, {})[group.topic] = group
        self._by_topic.setdefault(group.topic, set()).add(name)

    def _unindex(self, name: str, topic: str) -> None:
        groups = self._groups.get(name)
        if groups is not None:
            groups.pop(topic, None)
        names = self._by_topic.get(topic)
        if names is not None:
            names.discard(name)
            if not names:
                del self._by_topic[topic]

    def _topic_created(self, topic: str) -> None:
        """On the writer role: the topic may need endpoints' groups (the reconciler's)."""
        with self._fresh:
            self._fresh_topics[topic] = None
            self._fresh.notify()

    def _topic_deleted(self, topic: str) -> None:
        """Writer role: the queue store dropped the topic's groups; so does the index."""
        for name in self._by_topic.pop(topic, set()):
            groups = self._groups.get(name)
            if groups is not None:
                groups.pop(topic, None)

    @staticmethod
    def _queue_settings(endpoint: Endpoint, topic: str) -> dict[str, Any]:
        s = endpoint.settings
        return {
            "visibility_timeout_ms": endpoint.lease_ms,
            "max_attempts": s.max_attempts,
            "backoff": s.backoff,
            "expire_after_ms": s.expire_after_ms or 0,  # 0: none (None would keep the old one)
            "ordering": s.ordering,
            "dead_letter_topic": endpoint.dead_letter_topic(topic),
            "copy_dead": not names.is_dead_letters(topic),
        }

    def _store(self, endpoint: Endpoint) -> None:
        self.core.storage.write_atomic(layout.endpoint(endpoint.name), ep.encode(endpoint))
        self._endpoints[endpoint.name] = endpoint
        self._patterns.put(endpoint.name, endpoint.settings.topics)
        self._notify(endpoint.name)

    def _notify(self, name: str) -> None:
        for listener in self.changed:
            listener(name)

    def _delete_orphans(self) -> None:
        """Groups of endpoints that are gone (a crash while one was made or deleted)."""
        for owner in [name for name in self._groups if name not in self._endpoints]:
            for group in self._groups.pop(owner).values():
                log.info("deleting queue group %s/%s of no endpoint", group.topic, group.group)
                self.queues.delete_group(group.topic, group.group)
                self._unindex(owner, group.topic)


def _differs(group: QueueGroup, wanted: dict[str, Any]) -> bool:
    current = group.settings
    return any(
        getattr(current, field) != (None if field == "expire_after_ms" and not value else value)
        for field, value in wanted.items()
    )
