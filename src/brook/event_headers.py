"""The record headers delivery reads: the sender's own event id, and the event type.

- `brook.event-id`: the sender's id for the event (a UUID, `evt_123`, `order-42`).
  When a record carries one, it is the `webhook-id` of every request delivering the
  record (the receiver's de-duplication key, Standard Webhooks), instead of Brook's
  `topic:partition:offset`, and an endpoint's message can be found and resent by it.
- `brook.event-type`: the event's type (`invoice.paid`); endpoints may take only
  some types of a topic (their `event_types`), so one topic per tenant carries all
  its types and per-key order holds across them.

Any producer may set them, so appends check them (a bad one is a 400, never a record
whose requests cannot carry it as a header); records written otherwise read as having
none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from brook import limits
from brook.errors import BadRequest

EVENT_ID = "brook.event-id"
EVENT_TYPE = "brook.event-type"

EVENT_ID_PATTERN = rf"^[A-Za-z0-9._~:@+=-]{{1,{limits.event_id_chars_max}}}$"
"""What an HTTP header value and a URL path segment hold as they are, and every sender's id
scheme (UUIDs, ULIDs, prefixed ids) has room for; no `/` (proxies differ on a %2F)."""
EVENT_TYPE_PATTERN = rf"^[A-Za-z0-9._-]{{1,{limits.event_type_chars_max}}}$"
EVENT_TYPE_OR_GLOB_PATTERN = rf"^[A-Za-z0-9._*?\[\]!-]{{1,{limits.event_type_chars_max}}}$"
"""An event type or a glob pattern of them (an endpoint's `event_types`)."""
_ID = re.compile(EVENT_ID_PATTERN[1:-1])
_TYPE = re.compile(EVENT_TYPE_PATTERN[1:-1])


def check(record_headers: Mapping[str, bytes]) -> None:
    """Raise BadRequest if the record's event id or type is not valid."""
    for name, pattern, what in (
        (EVENT_ID, _ID, f"1 to {limits.event_id_chars_max} of A-Z a-z 0-9 . _ ~ : @ + = -"),
        (EVENT_TYPE, _TYPE, f"1 to {limits.event_type_chars_max} of A-Z a-z 0-9 . _ -"),
    ):
        raw = record_headers.get(name)
        if raw is not None and _text(raw, pattern) is None:
            raise BadRequest(f"header {name} must be {what}, not {bytes(raw)[:60]!r}")


def event_id(record_headers: Mapping[str, bytes] | None) -> str | None:
    """The record's event id, if it carries a valid one."""
    raw = record_headers.get(EVENT_ID) if record_headers else None
    return None if raw is None else _text(raw, _ID)


def event_type(record_headers: Mapping[str, bytes] | None) -> str | None:
    """The record's event type, if it carries a valid one."""
    raw = record_headers.get(EVENT_TYPE) if record_headers else None
    return None if raw is None else _text(raw, _TYPE)


def is_event_id(value: str) -> bool:
    return _ID.fullmatch(value) is not None


def is_event_type(value: str) -> bool:
    return _TYPE.fullmatch(value) is not None


def _text(raw: bytes, pattern: re.Pattern[str]) -> str | None:
    try:
        text = bytes(raw).decode("ascii")
    except UnicodeDecodeError:
        return None
    return text if pattern.fullmatch(text) else None
