"""The patterns of every name and id users give Brook, in one place.

Topic, group and endpoint names follow NAME; lease receipts follow RECEIPT; timer ids and the ids of staged
writes (writers, parts) follow ID, which also allows ':' (Spark's query and
task ids carry it). The checks in `validate`, `timers.checks` and
`staging.plan` and the wire contract's schemas (`brook.wire`) all use these.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from brook import limits

NAME_CHARS = "A-Za-z0-9._-"
ID_CHARS = "A-Za-z0-9._:-"
NAME_PATTERN = f"^[{NAME_CHARS}]{{1,{limits.topic_name_chars_max}}}$"
ID_PATTERN = f"^[{ID_CHARS}]{{1,{limits.timer_id_chars_max}}}$"

NAME = re.compile(f"[{NAME_CHARS}]{{1,{limits.topic_name_chars_max}}}")
"""Use with fullmatch (a `$` in Python also matches before a final newline)."""
ID = re.compile(f"[{ID_CHARS}]{{1,{limits.timer_id_chars_max}}}")

PATTERN = re.compile(rf"[A-Za-z0-9._*?\[\]!-]{{1,{limits.topic_name_chars_max}}}")
"""A topic name or a glob pattern of them (an endpoint's topics)."""
HEADER = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}")
"""An HTTP header name (RFC 9110's token)."""

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
