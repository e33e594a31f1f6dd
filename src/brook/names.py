"""The patterns of every name and id users give Brook, in one place.

Topic, group and endpoint names follow NAME; lease receipts follow RECEIPT; timer ids and the ids of staged
writes (writers, parts) follow ID, which also allows ':' (Spark's query and
task ids carry it). The checks in `validate`, `timers.checks` and
`staging.plan` and the wire contract's schemas (`brook.wire`) all use these.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from typing import Annotated

import msgspec

from brook import limits

NAME_CHARS = "A-Za-z0-9._-"
ID_CHARS = "A-Za-z0-9._:-"
NAME_PATTERN = f"^[{NAME_CHARS}]{{1,{limits.topic_name_chars_max}}}$"
ID_PATTERN = f"^[{ID_CHARS}]{{1,{limits.timer_id_chars_max}}}$"

USER_NAME_PATTERN = f"^(?!__)(?!\\.{{1,2}}$)[{NAME_CHARS}]{{1,{limits.topic_name_chars_max}}}$"
"""A name a user may give a topic, group or endpoint: NAME_PATTERN, not "." or "..", and
not starting with the reserved "__" (validate.topic_name holds names to it)."""

NAME = re.compile(f"[{NAME_CHARS}]{{1,{limits.topic_name_chars_max}}}")
USER_NAME = re.compile(USER_NAME_PATTERN[1:-1])
"""Use with fullmatch (a `$` in Python also matches before a final newline)."""
ID = re.compile(f"[{ID_CHARS}]{{1,{limits.timer_id_chars_max}}}")
MESSAGE_ID_PATTERN = f"^(?!__)(?!\\.{{1,2}}:)[{NAME_CHARS}]{{1,{limits.topic_name_chars_max}}}:[0-9]{{1,18}}:[0-9]{{1,18}}$"
"""A delivered record's webhook-id: its topic, partition and offset (topic:partition:offset)."""
TIMER_CURSOR_PATTERN = f"^[0-9]{{1,18}}:[{ID_CHARS}]{{1,{limits.timer_id_chars_max}}}$"
"""A page of pending timers ends at this cursor: the last one's due time and id."""

TOPIC_OR_GLOB_PATTERN = rf"^[A-Za-z0-9._*?\[\]!-]{{1,{limits.topic_name_chars_max}}}$"
PATTERN = re.compile(TOPIC_OR_GLOB_PATTERN[1:-1])
"""A topic name or a glob pattern of them (an endpoint's topics); use with fullmatch."""
HEADER_PATTERN = r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}$"
HEADER = re.compile(HEADER_PATTERN[1:-1])
"""An HTTP header name (RFC 9110's token); use with fullmatch."""

HOST_PATTERN = r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?"
"""A host name as an endpoint's URL may give it (international names in their xn-- form)."""
_PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
URL_PATTERN = rf"^https?://{HOST_PATTERN}(?::{_PORT})?(?:[/?][^#\s]*)?$"
"""The shape of the URLs an endpoint takes (delivery/addresses.check_url: a host name,
an optional port, no credentials, no fragment), for the OpenAPI document; beyond it,
an address that is loopback, private or link-local is refused unless private networks
are allowed."""

SECRET_PATTERN = (
    "^(?:whsec_(?:[A-Za-z0-9+/]{4}){6,16}(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?"
    "|whsk_(?:[A-Za-z0-9+/]{43}=?|[A-Za-z0-9+/]{86}(?:==)?))$"
)
"""An endpoint's secret as the OpenAPI document gives it: `whsec_` and base64 of 18 to 50
bytes (delivery/signing.key_of takes 16 to 64, padded or not: this pattern is within it), or
an Ed25519 key, `whsk_` and base64 of 32 or 64 bytes."""

RECEIPT_PATTERN = r"^[0-9]{1,10}\.[0-9]{1,19}\.[0-9]{1,10}\.[0-9]{1,20}\.[0-9a-f]{8}$"
"""A lease's receipt as queue groups make them: partition.offset.attempt.serial.token."""
RECEIPT = re.compile(RECEIPT_PATTERN[1:-1])

Name = Annotated[
    str, msgspec.Meta(pattern=NAME_PATTERN, description="1 to 200 of A-Z a-z 0-9 . _ -")
]
Id = Annotated[str, msgspec.Meta(pattern=ID_PATTERN, description="1 to 200 of A-Z a-z 0-9 . _ : -")]
Receipt = Annotated[
    str, msgspec.Meta(pattern=RECEIPT_PATTERN, description="A receipt from a lease, as given")
]


# ---------------------------------------------------------------- reserved names

RESERVED_PREFIX = "__"
"""Brook's internal topics (status logs, the timer log): never a user's topic."""
ENDPOINT_GROUP_PREFIX = "__endpoint."
"""The queue groups of a delivery endpoint are named this and its name."""
DEAD_LETTERS_SUFFIX = ".dlq"
"""The namespace of dead-letter topics, the names Brook derives for dead records."""
_DIGEST_CHARS = 16


def is_dead_letters(topic: str) -> bool:
    """Whether `topic` is in the dead-letter namespace (a name ending in `.dlq`)."""
    return topic.endswith(DEAD_LETTERS_SUFFIX)


def dead_letters(*parts: str) -> str:
    """The dead-letter topic Brook derives from `parts` (a topic, and an endpoint's
    name for its deliveries): `<parts joined by '.'>.dlq`, always a valid name of at
    most topic_name_chars_max characters. A longer one keeps its start and ends in a
    digest of the whole, so two different sources never share one by being cut."""
    base = ".".join(parts)
    name = base + DEAD_LETTERS_SUFFIX
    if len(name) <= limits.topic_name_chars_max:
        return name
    digest = hashlib.blake2b(base.encode(), digest_size=_DIGEST_CHARS // 2).hexdigest()
    keep = limits.topic_name_chars_max - len(DEAD_LETTERS_SUFFIX) - _DIGEST_CHARS - 1
    return f"{base[:keep]}.{digest}{DEAD_LETTERS_SUFFIX}"


GLOB_CHARS = "*?["


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in GLOB_CHARS)


def every_topic(pattern: str) -> bool:
    """Whether the glob matches every topic name (`*`, `**`, `?*`: only wildcards, one
    `*` at least, and no more `?` than the shortest name has characters)."""
    return (
        bool(pattern)
        and set(pattern) <= {"*", "?"}
        and "*" in pattern
        and (pattern.count("?") <= 1)
    )


def literal_prefix(pattern: str) -> str:
    """The part of a pattern every topic it takes begins with (the whole of a plain name)."""
    cut = min((i for i in (pattern.find(c) for c in GLOB_CHARS) if i >= 0), default=len(pattern))
    return pattern[:cut]


def pattern_within(pattern: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """Whether every topic `pattern` (a name or a glob) takes is taken by one of
    `patterns` (an API key's topics). Decided safely, never by guessing: a name by
    matching it; a glob only when it is one of them, or when one of them is a plain
    prefix and `*` (`events.c0001.*`) that the glob's literal part begins with (every
    topic the glob takes begins with that part, and `*` takes any rest). Other globs are
    refused even where they might lie within: a key may always be given more patterns."""
    for own in patterns:
        if pattern == own:
            return True
        if not is_glob(pattern):
            if fnmatch.fnmatchcase(pattern, own):
                return True
        elif (
            own.endswith("*")
            and not is_glob(own[:-1])
            and literal_prefix(pattern).startswith(own[:-1])
        ):
            return True
    return False


def pattern_matches(pattern: str, topic: str) -> bool:
    """Whether a user's topic pattern (a name or a glob) takes in `topic`. Reserved
    names are taken only by a pattern that names their namespace: an internal topic
    (`__...`) by one starting with `__`, a dead-letter topic by one ending in `.dlq`.
    So `orders.*` never takes `orders.dlq`, nor the dead letters of its own
    deliveries, and dead letters can never cascade through a glob."""
    if topic.startswith(RESERVED_PREFIX) and not pattern.startswith(RESERVED_PREFIX):
        return False
    if is_dead_letters(topic) and not is_dead_letters(pattern):
        return False
    return fnmatch.fnmatchcase(topic, pattern)
