"""What a row of the API's table is (`Operation`, its query's `Param`s) and what rows
share: path parameters, common query parameters, relations, route prefixes."""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from brook import limits, names, wire
from brook.event_headers import EVENT_ID_PATTERN, EVENT_TYPE_PATTERN
from brook.models import ErrorGroup

COUNT = {"type": "integer", "minimum": 0, "maximum": limits.whole_max}
POSITIVE = {"type": "integer", "minimum": 1, "maximum": limits.whole_max}
NAME = {"type": "string", "pattern": names.USER_NAME_PATTERN}
ID = {"type": "string", "pattern": names.ID_PATTERN}
PATH_PARAMETERS = {
    "topic": NAME,
    "group": NAME,
    "timer": ID,
    "join": ID,
    "writer": ID,
    "part": ID,
    "endpoint": NAME,
    "message": {
        "type": "string",
        "pattern": f"^(?:{names.MESSAGE_ID_PATTERN[1:-1]}|{EVENT_ID_PATTERN[1:-1]})$",
    },
    "event_type": {"type": "string", "pattern": EVENT_TYPE_PATTERN},
    "schedule": {
        "type": "string",
        "pattern": f"^[{names.NAME_CHARS}]{{1,{limits.schedule_name_chars_max}}}$",
    },
    "seq": {"type": "integer", "minimum": 0, "maximum": limits.staging_seq_max},
    "chunk": {"type": "integer", "minimum": 0, "maximum": limits.staging_chunks_per_part_max - 1},
}


ERROR_GROUPS = wire.listing("ErrorGroups", "errors", ErrorGroup)
"""Dead records grouped by what they died of: a queue group's, an endpoint's."""


POSITION_PATTERN = "^(0|[1-9][0-9]{0,17}):(0|[1-9][0-9]{0,17})$"
"""A record's place as a query parameter: `partition:offset`."""


class Param(NamedTuple):
    """One query parameter of an operation: how the server reads it (and 400s when it
    cannot), its default, its bounds, and the schema and sentence the OpenAPI document
    and docs/PROTOCOL.md show: one row for all of them."""

    name: str
    kind: str
    """"whole" (decimal digits within 63 bits), "text", "flag" (true/false, 1/0),
    "choice" (one of `choices`) or "position" (`partition:offset`, a record's place)."""
    description: str
    default: Any = None
    """What an absent parameter means (None: nothing given)."""
    required: bool = False
    low: int = 0
    """The least a whole number may be; less is a 400."""
    cap: int | None = None
    """A whole number above this is taken as this (capped, not refused: SPEC §4's limit)."""
    high: int | None = None
    """The most a whole number may be; more is a 400."""
    pattern: str | None = None
    """A text's pattern, shown in the schema (the call itself checks it)."""
    choices: tuple[str, ...] = ()

    def schema(self) -> dict[str, Any]:
        """Its JSON Schema, for the OpenAPI document."""
        if self.kind == "whole":
            most = limits.whole_max if self.high is None else self.high
            return {"type": "integer", "minimum": self.low, "maximum": most}
        if self.kind == "flag":
            return {"type": "boolean"}
        if self.kind == "choice":
            return {"enum": list(self.choices)}
        if self.kind == "position":
            return {"type": "string", "pattern": POSITION_PATTERN}
        return {"type": "string", **({"pattern": self.pattern} if self.pattern else {})}

    def sentence(self) -> str:
        """Its description with its default and cap, as the docs show it."""
        notes = []
        if self.default is not None and self.kind != "flag":
            notes.append(f"default {self.default}")
        if self.cap is not None:
            notes.append(f"capped at {self.cap}")
        return self.description + (f" ({'; '.join(notes)})" if notes else "")


def whole(
    name: str,
    description: str,
    default: int | None = None,
    low: int = 0,
    cap: int | None = None,
    high: int | None = None,
) -> Param:
    """A whole number a call may be given."""
    return Param(name, "whole", description, default, False, low, cap, high)


def needed(name: str, description: str) -> Param:
    """A whole number the call cannot go without."""
    return Param(name, "whole", description, required=True)


class Operation(NamedTuple):
    """One operation of the HTTP API: the route, who may call it, whether a client may
    send it again, and what goes in and comes out."""

    name: str
    """Its name: the OpenAPI operationId, and the handler the server registers for it."""
    method: str
    path: str
    """The path template; {names} are path parameters (PATH_PARAMETERS)."""
    scope: str | None
    """The API-key scope it needs: produce, consume, admin, "any" (any valid key), or
    None (open to all)."""
    retry_safe: bool
    """Sending it twice does no harm, so a client resends it after a lost answer. Some
    are safe only with what they carry (appends whose records all have idempotency
    keys, named timers, an endpoint given its secret): clients decide those per call."""
    summary: str
    answer: type[msgspec.Struct] | None = None
    """The 200 answer's JSON shape (None: an object whose shape is not promised)."""
    body: type[wire.In] | None = None
    """The JSON request body's shape."""
    body_required: bool = True
    query: tuple[Param, ...] = ()
    """Its query parameters."""
    binary: tuple[str, ...] = ()
    """Media types taken besides JSON, as binary bodies."""
    text_answer: bool = False
    example: dict[str, Any] | None = None
    """A JSON request body the server takes (shown in the OpenAPI document; tested)."""
    relations: tuple[tuple[str, str], ...] = ()
    """Rules JSON Schema cannot state (between fields, with the path, with the time):
    (the sentence the description gives, a pattern of the 400's message that keeps it)."""
    executor: str = "loop"
    """Where the server runs it: "loop" (in memory, never waits: on the event loop),
    "read" (reads storage: the read threads), "blocking" (waits for a commit round or
    writes a file: the call threads), "long" (runs for seconds: a lake sync, a test
    request, a replay; threads of its own, so it never holds up the calls that wait for
    a commit round). Long-polls wait on the loop, then read or call as declared."""
    call: str | None = None
    """The facade call that answers it, for the one generic server adapter
    (server/adapter.py) and the one generic client call (client/protocol.py): a method
    of the broker (`put_schedule`), given the path's parameters first, or of a handle
    the path names (`queue.trace`, `endpoint.stats`: the key must reach it), given
    none; then the query's parameters and the body's `arguments()` as keywords, and
    the answer made by `answer.of(result)`. None: the operation has a handler of its
    own (the hot path, binary bodies, long-polls, answers filtered by the key)."""
    client: str | None = None
    """For a row with a handler of its own (the key shapes what it takes or tells), the
    API method a client makes from it as from a row with a call: its body the call's
    keywords (`In.of_arguments`), its answer read back (`Out.returned()`)."""
    guard: str | None = None
    """For a broker call, what the key must reach first (a 403 before the body is read):
    "endpoint" (the endpoint the path names), "schedule" (the schedule the path names
    fires into the key's topics), "whole_broker" (what every tenant shares: a key for
    every topic and no tenant)."""
    visible: str | None = None
    """For a key limited to some topics: the attribute that names each answered item's topic
    ("name", "topic"); items beyond the key are left out of the answer, and a `topic`
    argument beyond it is refused (403)."""


WAIT = whole("wait_ms", "Long-poll up to this long", 0, cap=limits.wait_ms_max)
PARTITION = whole("partition", "Every record goes to this partition (default: by key)")
START = Param(
    "start",
    "choice",
    "Where a group new to the broker starts",
    "earliest",
    choices=("earliest", "latest"),
)
BACKOFF_RELATION = (
    "backoff.max_ms is at least backoff.min_ms (those given, or those stored)",
    r"backoff\.max_ms must be at least",
)
WEAK_SECRET_RELATION = (
    "a secret whose key holds fewer than min(8, its length / 4) distinct byte values "
    "(all zero, one repeated letter) is refused as too easy to guess",
    r"too easy to guess",
)
ED25519_PAIR_RELATION = (
    "a whsk_ secret of 64 bytes (libsodium's form) is the seed, then the seed's own public "
    "key: another second half is refused",
    r"second half is not its seed's public key",
)


PAST_THE_END = (
    "an offset is at most its partition's end (the next offset to be written)",
    r"is past the end of partition",
)
QUEUE = "/v1/topics/{topic}/queues/{group}"
STAGED = "/v1/topics/{topic}/staged/{writer}/{seq}"
ENDPOINT = "/v1/endpoints/{endpoint}"
EVENT_TYPE = "/v1/event-types/{event_type}"
SCHEDULE = "/v1/schedules/{schedule}"
