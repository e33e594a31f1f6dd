"""A delivered message found by its webhook-id, to show its attempts or send it again.

A `webhook-id` is either Brook's own (`topic:partition:offset`: found at once, however
old) or, for a record carrying `brook.event-id`, the sender's (event_headers): that one
is looked for among the records of the topics concerned appended in the last
`limits.event_id_search_ms`, reading their headers only as far as that. A topic per
customer keeps this small; a single busy topic makes it a read of its last week.
An id shaped like Brook's (`order:1:2`) names the record at that place when there is one
(the dashboard resends by place), and is looked for as an event id otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from brook import event_headers, limits, names
from brook.errors import BadRequest, TopicNotFound

if TYPE_CHECKING:
    from brook.core import Core

Position = tuple[str, int, int]
"""(topic, partition, offset) of a record."""


def locate(core: Core, webhook_id: str, topics: Iterable[str]) -> list[Position]:
    """Where the message lies among `topics` (the endpoint's): one place for Brook's
    ids; for an event id every record carrying it (a sender may have sent it twice),
    oldest first. BadRequest for text no request of Brook's could carry."""
    positional = _positional(webhook_id)
    is_event = event_headers.is_event_id(webhook_id)
    if positional is None and not is_event:
        raise BadRequest(
            f"{webhook_id[:80]!r} is not a webhook-id: Brook sends topic:partition:offset, "
            "or the record's brook.event-id"
        )
    wanted = sorted(set(topics))
    if positional is not None and positional[0] in wanted and _holds(core, *positional):
        return [positional]
    if not is_event:
        return []
    since = core.now_ms() - limits.event_id_search_ms
    out: list[Position] = []
    for topic in wanted:
        try:
            logs = core.topic_state(topic).logs
        except TopicNotFound:
            continue
        for log in logs:
            offset = log.offset_at(since)
            while offset < log.durable_offset:
                records = log.read(offset, limits.event_id_search_read_records)
                if not records:
                    break
                for record in records:
                    if event_headers.event_id(record.headers) == webhook_id:
                        out.append((topic, log.partition, record.offset))
                offset = records[-1].offset + 1
    return out


def missing(webhook_id: str, topics: Iterable[str]) -> str:
    """Why `locate` found no message for this id among `topics`, in words: for Brook's
    own id, which of its parts leads nowhere; for an event id, how far back it looked."""
    searched = f"the last {limits.event_id_search_ms // 86_400_000} days of records"
    positional = _positional(webhook_id)
    if positional is None:
        return f"no record of its topics carries this event id (among {searched})"
    topic, partition, offset = positional
    if topic not in set(topics):
        where = f"it delivers nothing from topic {topic}"
    else:
        where = f"topic {topic} holds no record at partition {partition}, offset {offset}"
    if event_headers.is_event_id(webhook_id):
        return f"{where}, and no record carries it as an event id (among {searched})"
    return where


def _positional(webhook_id: str) -> Position | None:
    if not re.fullmatch(names.MESSAGE_ID_PATTERN, webhook_id):
        return None
    topic, partition, offset = webhook_id.rsplit(":", 2)
    return topic, int(partition), int(offset)


def _holds(core: Core, topic: str, partition: int, offset: int) -> bool:
    """Whether a record lies there now (retention may have removed it)."""
    try:
        logs = core.topic_state(topic).logs
    except TopicNotFound:
        return False
    return 0 <= partition < len(logs) and logs[partition].start_offset <= offset < (
        logs[partition].durable_offset
    )
