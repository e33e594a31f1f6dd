"""The broker's calls of delivery: endpoints, their messages' attempts, the event-type
catalog and tenants' portal links. Part of `Broker` (brook/broker/__init__.py)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from brook import layout, limits, portal_links, validate
from brook.delivery import endpoint as delivery_endpoint
from brook.delivery import handle as delivery_handle
from brook.delivery import messages as delivery_messages
from brook.delivery.handle import Endpoint
from brook.errors import (
    EndpointNotFound,
    PartitionNotFound,
    TopicNotFound,
)
from brook.models import Backoff
from brook.portal_links import PortalLinks
from brook.records import (
    EndpointInfo,
    EventTypeInfo,
    MessageAttempts,
    PortalLink,
)

if TYPE_CHECKING:
    from brook.broker import Broker

log = logging.getLogger("brook")


class EndpointCalls:
    def message_attempts(self: Broker, webhook_id: str) -> list[MessageAttempts]:
        """Every attempt to deliver the message whose requests carried `webhook_id` (the
        `webhook-id` header: topic:partition:offset, or the record's brook.event-id),
        endpoint by endpoint, those that tried it only. Raises BadRequest for an id
        Brook does not send."""
        self.core.check_open()
        store = self.endpoint_store
        found = []
        for topic, partition, offset in delivery_messages.locate(
            self.core, webhook_id, store.delivered_topics()
        ):
            for name in sorted(store.endpoints_on(topic)):  # not every endpoint
                try:
                    attempts = self.endpoint(name).attempts(topic, partition, offset)
                except (TopicNotFound, EndpointNotFound, PartitionNotFound):
                    continue  # it stopped delivering that topic (or partition), or just went
                if attempts:
                    found.append(MessageAttempts(endpoint=name, attempts=attempts))
        return found

    def create_endpoint(
        self: Broker,
        name: str,
        url: str | None = None,
        topics: Sequence[str] | None = None,
        *,
        secret: str | None = None,
        headers: dict[str, str] | None = None,
        timeout_ms: int | None = None,
        max_in_flight: int | None = None,
        rate_limit_per_s: int | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | dict[str, Any] | None = None,
        expire_after_ms: int | None = None,
        disable_after_ms: int | None = None,
        ordering: str | None = None,
        enabled: bool | None = None,
        start: str | None = None,
        tenant: str | None = None,
        event_types: Sequence[str] | None = None,
        signature: str | None = None,
    ) -> EndpointInfo:
        """Create endpoint `name` (url and topics needed), or change the settings
        given (None keeps a setting). Records of every topic matching `topics` (names
        or glob patterns) appended from now on (or all retained, start="earliest") are
        posted to `url`, signed. `tenant` names the customer it belongs to (keys naming
        a tenant reach only its endpoints). The answer carries the secret when one was
        made or given: it is shown this once. Raises BadRequest, InvalidName."""
        self.core.check_open()
        given = {
            "url": url,
            "topics": None if topics is None else list(topics),
            "secret": secret,
            "headers": headers,
            "timeout_ms": timeout_ms,
            "max_in_flight": max_in_flight,
            "rate_limit_per_s": rate_limit_per_s,
            "max_attempts": max_attempts,
            "backoff": backoff,
            "expire_after_ms": expire_after_ms,
            "disable_after_ms": disable_after_ms,
            "ordering": ordering,
            "enabled": enabled,
            "start": start,
            "tenant": tenant,
            "event_types": None if event_types is None else list(event_types),
            "signature": signature,
        }
        endpoint, made = self.endpoint_store.put(
            name, {k: v for k, v in given.items() if v is not None}
        )
        return delivery_handle.info(endpoint, made, self._endpoint_warnings(endpoint))

    def _endpoint_warnings(self: Broker, endpoint: delivery_endpoint.Endpoint) -> list[str]:
        """What a change accepted but that looks wrong: a pattern that takes no topic yet
        (`evnets.*`), an event type the catalog has nothing for."""
        warnings = [
            f"topic pattern {pattern!r} matches no topic yet"
            for pattern in self.endpoint_store.idle_patterns(endpoint)
        ]
        wanted = endpoint.settings.event_types or ()
        warnings += [
            f"event type {kind!r} matches no event type in the catalog"
            for kind in self._catalog.unknown(wanted)
        ]
        return warnings

    def portal_link(
        self: Broker, tenant: str, ttl_s: int = limits.portal_ttl_s_default
    ) -> PortalLink:
        """A link to the dashboard that shows tenant `tenant` its own endpoints (their
        attempts, test, replay, resend, a new secret, disable and enable) and nothing
        else, for `ttl_s` seconds, without an API key (server/ui/portal.py). Open it on
        the server that serves this broker: `path` is `/ui/portal/<token>`.
        Raises BadRequest."""
        self.core.check_open()
        validate.tenant(tenant)
        ttl_s = validate.whole(ttl_s, "ttl_s", limits.portal_ttl_s_min, limits.portal_ttl_s_max)
        expires_ms = self.core.now_ms() + ttl_s * 1000
        token = PortalLinks(self.portal_key()).token(tenant, expires_ms)
        return PortalLink(tenant=tenant, path=f"/ui/portal/{token}", expires_ms=expires_ms)

    def portal_key(self: Broker) -> bytes:
        """What portal links are signed with: kept in storage, made on first use (a
        read-only broker cannot make one: ReadOnly)."""
        raw = self.core.storage.read_all(layout.PORTAL_KEY)
        if raw is not None and len(raw) == portal_links.KEY_BYTES:
            return raw
        self.core.check_writable("make the key portal links are signed with")
        key = secrets.token_bytes(portal_links.KEY_BYTES)
        self.core.storage.write_atomic(layout.PORTAL_KEY, key)
        return key

    def put_event_type(
        self: Broker,
        name: str,
        description: str | None = None,
        schema: dict[str, Any] | None = None,
    ) -> EventTypeInfo:
        """Add an event type to the catalog (`invoice.paid`), or change what is given of
        it: a description, and a JSON Schema of its events' bodies (documentation for
        receivers; appends are not checked against it). Raises BadRequest."""
        self.core.check_open()
        self.core.check_writable("add an event type")
        return self._catalog.put(name, description, schema, self.core.now_ms())

    def event_types(self: Broker) -> list[EventTypeInfo]:
        """The catalog, by name."""
        self.core.check_open()
        return self._catalog.all()

    def event_type(self: Broker, name: str) -> EventTypeInfo:
        """One type of the catalog. Raises EventTypeNotFound."""
        self.core.check_open()
        return self._catalog.get(name)

    def delete_event_type(self: Broker, name: str) -> None:
        """Remove a type from the catalog (records carrying it are not touched).
        Raises EventTypeNotFound."""
        self.core.check_open()
        self.core.check_writable("delete an event type")
        self._catalog.delete(name)

    def endpoints(self: Broker) -> list[EndpointInfo]:
        """Every endpoint, by name (no secrets)."""
        self.core.check_open()
        return [delivery_handle.info(e) for e in self.endpoint_store.endpoints()]

    def endpoint(self: Broker, name: str) -> Endpoint:
        """A handle on endpoint `name`: stats, attempts, redrive, enable, disable,
        test. Raises EndpointNotFound."""
        self.core.check_open()
        return Endpoint(self.endpoint_store, self.delivery, name)

    def delete_endpoint(self: Broker, name: str) -> None:
        """Delete the endpoint and its queue groups: records not yet delivered never
        will be. Raises EndpointNotFound."""
        self.endpoint_store.delete(name)
