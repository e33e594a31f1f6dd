"""The event-type catalog: the types of event a broker's records carry, described.

A SaaS that sends webhooks documents its events for its customers (Svix's event
types): `invoice.paid`, what it means, and what its body looks like (an optional JSON
Schema). A record says its type in the header `brook.event-type` (event_headers), and
endpoints may take only some types (`event_types`). The catalog is what those names
are checked against: an endpoint's type that matches none is accepted with a warning
(a typo, or a type documented later), never refused. A schema is documentation for
receivers (shown by the API, the dashboard and the portal); appends are not checked
against it.

Each type is a file, `event-types/<name>.json`, written atomically; on object storage
an object, so a fresh machine on the same bucket has the catalog.
"""

from __future__ import annotations

import fnmatch
import threading
from typing import Any

import msgspec

from brook import layout, limits, validate
from brook.errors import BadRequest, EventTypeNotFound
from brook.records import EventTypeInfo
from brook.storage import Storage


class EventTypes:
    def __init__(self, storage: Storage, read_only: bool) -> None:
        self.storage = storage
        self.read_only = read_only
        self._mutex = threading.Lock()
        self._types: dict[str, EventTypeInfo] = {}
        for name in storage.list(layout.EVENT_TYPES):
            found = layout.parse_event_type(name)
            raw = storage.read_all(name) if found is not None else None
            if found is not None and raw is not None:
                self._types[found] = msgspec.json.decode(raw, type=EventTypeInfo)

    def all(self) -> list[EventTypeInfo]:
        """Every type, by name."""
        return [self._types[name] for name in sorted(self._types)]

    def get(self, name: str) -> EventTypeInfo:
        found = self._types.get(name)
        if found is None:
            raise EventTypeNotFound(f"no event type {name} is in the catalog")
        return found

    def put(
        self, name: str, description: str | None, schema: dict[str, Any] | None, now_ms: int
    ) -> EventTypeInfo:
        """Add the type, or change what is given of it (None keeps it). BadRequest."""
        validate.event_type(name)
        if description is not None and (
            not isinstance(description, str)
            or len(description) > limits.event_type_description_chars_max
        ):
            raise BadRequest(
                f"description must be text of at most "
                f"{limits.event_type_description_chars_max:,} characters"
            )
        if schema is not None:
            if not isinstance(schema, dict):
                raise BadRequest("schema must be a JSON object (a JSON Schema)")
            if len(msgspec.json.encode(schema)) > limits.event_type_schema_bytes_max:
                raise BadRequest(
                    f"schema must be at most {limits.event_type_schema_bytes_max:,} bytes of JSON"
                )
        with self._mutex:
            old = self._types.get(name)
            made = EventTypeInfo(
                name=name,
                description=description
                if description is not None
                else (old.description if old else ""),
                schema=schema if schema is not None else (old.schema if old else None),
                created_ms=old.created_ms if old else now_ms,
                updated_ms=now_ms,
            )
            self.storage.write_atomic(layout.event_type(name), msgspec.json.encode(made))
            self._types[name] = made
        return made

    def delete(self, name: str) -> None:
        """Remove the type from the catalog (records carrying it are not touched)."""
        with self._mutex:
            self.get(name)
            self.storage.delete(layout.event_type(name))
            del self._types[name]

    def unknown(self, wanted: tuple[str, ...] | list[str]) -> list[str]:
        """Those of an endpoint's types (or patterns) that match no type in the catalog;
        none while the catalog is empty (a broker that keeps none)."""
        if not self._types:
            return []
        names = list(self._types)
        return [w for w in wanted if not any(fnmatch.fnmatchcase(n, w) for n in names)]
