"""Every endpoint of a broker, stored durably, and their queue groups kept in step.

An endpoint is a file (`endpoints/<name>.json`, layout.endpoint) written
atomically; on S3 it is an object, so a fresh machine on the same bucket finds
every endpoint and resumes delivery where the queue groups stand.

Each (endpoint, topic) pair is a queue group named `__endpoint.<name>` on the
topic. Creating an endpoint creates the groups of the topics it matches first
(starting at their end, or at their oldest record with start="earliest") and
writes the endpoint last, so a crash between the two leaves only groups that a
start finds orphaned and deletes. A topic created later gets its group when the
delivery loop next reconciles (every RECONCILE_S), starting at its oldest
record: every record of it came after the endpoint.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from brook import layout, names
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
        self.changed: list[Callable[[], None]] = []
        """Called after any endpoint changed (the delivery loop looks again)."""
        for name in core.storage.list(layout.ENDPOINTS):
            found = layout.parse_endpoint(name)
            raw = core.storage.read_all(name) if found is not None else None
            if found is not None and raw is not None:
                self._endpoints[found] = ep.decode(raw)
        if not core.read_only:
            self._delete_orphans()

    # ------------------------------------------------------------ reading

    def get(self, name: str) -> Endpoint:
        """The endpoint; EndpointNotFound."""
        found = self._endpoints.get(name)
        if found is None:
            raise EndpointNotFound(f"no endpoint {name} exists")
        return found

    def has_endpoints(self) -> bool:
        return bool(self._endpoints)

    def endpoints(self) -> list[Endpoint]:
        return [self._endpoints[name] for name in sorted(self._endpoints)]

    def groups(self, endpoint: Endpoint) -> list[QueueGroup]:
        """The endpoint's queue groups, one per topic it delivers from."""
        name = endpoint.group()
        return [g for g in self.queues.groups() if g.group == name]

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
            self.core.supervisor.forget_subject(ep.subject(name))
        self._notify()

    def set_enabled(self, name: str, enabled: bool, reason: str = "") -> Endpoint:
        """Enable or disable; a disabled endpoint's records wait in its groups."""
        with self._mutex:
            endpoint = self.get(name)
            if endpoint.settings.enabled == enabled and endpoint.disabled_reason == reason:
                return endpoint
            changed = ep.Endpoint(
                name=endpoint.name,
                settings=msgspec.structs.replace(endpoint.settings, enabled=enabled),
                secrets=endpoint.secrets,
                created_ms=endpoint.created_ms,
                disabled_reason="" if enabled else (reason or "disabled by hand"),
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
            changed = ep.Endpoint(
                name=endpoint.name,
                settings=endpoint.settings,
                secrets=ep.rotated(endpoint.secrets, new, self.core.now_ms()),
                created_ms=endpoint.created_ms,
                disabled_reason=endpoint.disabled_reason,
            )
            self._store(changed)
        return new

    def reconcile(self) -> None:
        """Give every topic an endpoint matches its queue group (topics made since)."""
        if self.core.read_only:
            return
        supervisor = self.core.supervisor
        with self._mutex:
            for endpoint in list(self._endpoints.values()):
                with supervisor.isolate("delivery", ep.subject(endpoint.name), "topics"):
                    self._align_groups(endpoint, by_hand=False)

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
        name = endpoint.group()
        have = {g.topic: g for g in self.groups(endpoint)}
        for state in self.core.topic_states():
            topic = state.name
            if not endpoint.matches(topic):
                continue
            settings = self._queue_settings(endpoint, topic)
            group = have.pop(topic, None)
            if group is None:
                start = endpoint.settings.start if by_hand else "earliest"
                self.queues.group(topic, name, internal=True, start=start, **settings)
            elif _differs(group, settings):
                self.queues.group(topic, name, internal=True, **settings)
        for topic in have:
            self.queues.delete_group(topic, name)

    @staticmethod
    def _queue_settings(endpoint: Endpoint, topic: str) -> dict[str, Any]:
        s = endpoint.settings
        return {
            "visibility_timeout_ms": endpoint.lease_ms,
            "max_attempts": s.max_attempts,
            "backoff": s.backoff,
            "expire_after_ms": s.expire_after_ms,
            "ordering": s.ordering,
            "dead_letter_topic": endpoint.dead_letter_topic(topic),
            "copy_dead": not names.is_dead_letters(topic),
        }

    def _store(self, endpoint: Endpoint) -> None:
        self.core.storage.write_atomic(layout.endpoint(endpoint.name), ep.encode(endpoint))
        self._endpoints[endpoint.name] = endpoint
        self._notify()

    def _notify(self) -> None:
        for listener in self.changed:
            listener()

    def _delete_orphans(self) -> None:
        """Groups of endpoints that are gone (a crash while one was made or deleted)."""
        for group in self.queues.groups():
            owner = ep.group_endpoint(group.group)
            if owner is not None and owner not in self._endpoints:
                log.info("deleting queue group %s/%s of no endpoint", group.topic, group.group)
                self.queues.delete_group(group.topic, group.group)


def _differs(group: QueueGroup, wanted: dict[str, Any]) -> bool:
    current = group.settings
    return any(getattr(current, field) != value for field, value in wanted.items())
