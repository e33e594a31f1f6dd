"""Every endpoint of a broker, stored durably, and their queue groups kept in step.

An endpoint is a file (`endpoints/<name>.json`, layout.endpoint) written
atomically; on S3 it is an object, so a fresh machine on the same bucket finds
every endpoint and resumes delivery where the queue groups stand.

Each (endpoint, topic) pair is a queue group named `__endpoint.<name>` on the
topic. Creating an endpoint creates the groups of the topics it matches first
(starting at their end, or at their oldest record with start="earliest") and
writes the endpoint last, so a crash between the two leaves only groups that a
start finds orphaned and deletes. A topic created later gets its group when the
delivery loop next reconciles (told by the topic's creation), starting at its
oldest record: every record of it came after the endpoint. The store keeps the
groups indexed by endpoint and by topic, so nothing here costs the number of
endpoints or topics but what a change touches.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from brook import layout, names
from brook.core import Hooks
from brook.delivery import endpoint as ep
from brook.delivery import signing
from brook.delivery.endpoint import Endpoint
from brook.errors import EndpointNotFound
from brook.queue.shell import QueueGroup

if TYPE_CHECKING:
    from brook.core import Core
    from brook.queue.store import QueueStore

log = logging.getLogger("brook.delivery")


class EndpointStore:
    def __init__(self, core: Core, queues: QueueStore, allow_private: bool = False) -> None:
        self.core = core
        self.queues = queues
        self.allow_private = allow_private
        self._mutex = threading.Lock()
        """Held while endpoints or their groups change (one change at a time)."""
        self._endpoints: dict[str, Endpoint] = {}
        self._groups: dict[str, dict[str, QueueGroup]] = {}
        """Endpoint name -> topic -> its queue group there (an index of the queue store's)."""
        self._by_topic: dict[str, set[str]] = {}
        """Topic -> the endpoints with a group on it."""
        self._fresh_topics: set[str] = set()
        """Topics made since the last `reconcile`: they may need endpoints' groups."""
        self._fresh_mutex = threading.Lock()
        self.changed: list[Callable[[str | None], None]] = []
        """Called after an endpoint changed, with its name (the delivery loop looks again)."""
        for name in core.storage.list(layout.ENDPOINTS):
            found = layout.parse_endpoint(name)
            raw = core.storage.read_all(name) if found is not None else None
            if found is not None and raw is not None:
                self._endpoints[found] = ep.decode(raw)
        for group in queues.groups():
            owner = ep.group_endpoint(group.group)
            if owner is not None:
                self._index(owner, group)
        if not core.read_only:
            self._delete_orphans()
            self._fresh_topics.update(state.name for state in core.topic_states())
            core.register(
                Hooks(
                    "endpoints",
                    on_topic_created=self._topic_created,
                    on_topic_deleted=self._topic_deleted,
                )
            )

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

    def groups(self, endpoint: Endpoint) -> list[QueueGroup]:
        """The endpoint's queue groups, one per topic it delivers from."""
        return list(self._groups.get(endpoint.name, {}).values())

    def group_on(self, endpoint: Endpoint, topic: str) -> QueueGroup | None:
        return self._groups.get(endpoint.name, {}).get(topic)

    def has_endpoints_on(self, topic: str) -> bool:
        return topic in self._by_topic

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
            endpoint, secret = ep.merge(name, stored, given, self.core.now_ms(), self.allow_private)
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
        new = secret if secret is not None else signing.new_secret()
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
        """Give the topics made since the last call their endpoints' queue groups
        (every topic at the first call: a crash may have left a group unmade). Costs
        the new topics times the endpoints, nothing for topics seen before."""
        if self.core.read_only or not self._fresh_topics:
            return
        supervisor = self.core.supervisor
        with self._mutex:
            with self._fresh_mutex:
                fresh, self._fresh_topics = self._fresh_topics, set()
            topics = sorted(t for t in fresh if self.core.has_topic(t))
            for endpoint in list(self._endpoints.values()):
                with supervisor.isolate("delivery", ep.subject(endpoint.name), "topics"):
                    self._add_groups(endpoint, topics)

    def has_fresh_topics(self) -> bool:
        return bool(self._fresh_topics)

    def stop(self) -> None:
        """No thread of its own (the delivery loop reconciles)."""

    def close(self) -> None:
        """Nothing held open: endpoints are whole files."""

    # ------------------------------------------------------------ inside

    def _align_groups(self, endpoint: Endpoint, by_hand: bool) -> None:
        """Holding the mutex: a group on each topic the endpoint matches, with the
        endpoint's settings; none on the others. A group made when the endpoint is
        created or changed starts where the endpoint's `start` says; one made by
        `reconcile` is for a topic made since, all of whose records are new."""
        name = endpoint.name
        have = dict(self._groups.get(name, {}))
        for topic in self._candidates(endpoint):
            if not endpoint.matches(topic):
                continue
            settings = self._queue_settings(endpoint, topic)
            group = have.pop(topic, None)
            if group is None:
                start = endpoint.settings.start if by_hand else "earliest"
                made = self.queues.group(
                    topic, endpoint.group(), internal=True, start=start, **settings
                )
                self._index(name, made)
            elif _differs(group, settings):
                self.queues.group(topic, endpoint.group(), internal=True, **settings)
        for topic in have:
            self.queues.delete_group(topic, endpoint.group())
            self._unindex(name, topic)

    def _add_groups(self, endpoint: Endpoint, topics: list[str]) -> None:
        """Holding the mutex: groups on those of `topics` (made since) the endpoint
        matches and has none on, from their oldest record."""
        for topic in topics:
            if not endpoint.matches(topic) or self.group_on(endpoint, topic) is not None:
                continue
            settings = self._queue_settings(endpoint, topic)
            made = self.queues.group(
                topic, endpoint.group(), internal=True, start="earliest", **settings
            )
            self._index(endpoint.name, made)

    def _candidates(self, endpoint: Endpoint) -> list[str]:
        """The topics the endpoint could match: those it names, when it names them
        all outright (no look at every topic: bulk creation stays fast); else every one."""
        patterns = endpoint.settings.topics
        if all(not any(c in p for c in "*?[") for p in patterns):
            return [p for p in patterns if self.core.has_topic(p)]
        return [state.name for state in self.core.topic_states()]

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
        """On the writer role: the topic may need endpoints' groups (at the next reconcile)."""
        with self._fresh_mutex:
            self._fresh_topics.add(topic)
        for listener in self.changed:
            listener(None)

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
