"""The HTTP API v1 as one table: every operation's name, method, path, API-key scope,
retry-safety, query parameters, request and answer shapes, and the rules between
fields that a schema cannot state.

The server's router, the OpenAPI document and the clients' calls are all made from
this table (tests check each against it), so the API is declared once.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from urllib.parse import quote

import msgspec

from brook import limits, names, wire
from brook.event_headers import EVENT_ID_PATTERN, EVENT_TYPE_PATTERN
from brook.models import DeadRecord, ErrorGroup
from brook.records import (
    DeliveryStats,
    EndpointInfo,
    EventTypeInfo,
    PortalLink,
    Published,
    Resent,
)

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
    guard: str | None = None
    """For a broker call whose path names an endpoint: "endpoint", the key must reach it."""


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
_PAST_HOURS = limits.timer_at_past_max_ms // 3_600_000
_AHEAD_YEARS = limits.timer_horizon_ms_max // (365 * 86_400_000)
QUEUE = "/v1/topics/{topic}/queues/{group}"
STAGED = "/v1/topics/{topic}/staged/{writer}/{seq}"
ENDPOINT = "/v1/endpoints/{endpoint}"
EVENT_TYPE = "/v1/event-types/{event_type}"
SCHEDULE = "/v1/schedules/{schedule}"

TABLE: tuple[Operation, ...] = (
    Operation(
        "health",
        "GET",
        "/v1/health",
        None,
        True,
        "Ready to serve; 503 names the failing loops",
        wire.Health,
        executor="loop",
    ),
    Operation("openapi", "GET", "/openapi.json", "any", True, "This description", executor="loop"),
    Operation(
        "metrics",
        "GET",
        "/metrics",
        "admin",
        True,
        "Prometheus metrics",
        text_answer=True,
        executor="read",
    ),
    Operation(
        "list_topics", "GET", "/v1/topics", "any", True, "List topics", wire.Topics, executor="read"
    ),
    Operation(
        "create_topic",
        "PUT",
        "/v1/topics/{topic}",
        "admin",
        True,
        "Create a topic (the same settings again is a no-op)",
        wire.TopicOut,
        wire.TopicSettingsIn,
        body_required=False,
        example={"partitions": 4, "retention_ms": 604800000},
        relations=(
            (
                "a value_schema is a JSON Schema of an object whose properties have one type "
                "each: string, integer, number, boolean, object or array (docs/FORMAT.md, Lake)",
                r"value_schema",
            ),
        ),
        executor="blocking",
        call="create_topic",
    ),
    Operation(
        "describe_topic",
        "GET",
        "/v1/topics/{topic}",
        "any",
        True,
        "Describe a topic",
        wire.TopicDetail,
        executor="read",
    ),
    Operation(
        "delete_topic",
        "DELETE",
        "/v1/topics/{topic}",
        "admin",
        False,
        "Delete a topic",
        wire.Deleted,
        executor="blocking",
        call="delete_topic",
    ),
    Operation(
        "append",
        "POST",
        "/v1/topics/{topic}/records",
        "produce",
        False,
        "Append records; answered once they are durable",
        wire.Acks,
        wire.RecordsIn,
        relations=(
            (
                "an idempotency_key is at most 256 bytes as UTF-8 (the schema counts characters)",
                r"idempotency_key must be 1 to 256 bytes",
            ),
        ),
        query=(Param("key", "text", "Key of a raw-body record"), PARTITION),
        binary=(wire.RAW_TYPE, wire.BATCH_TYPE),
        example={
            "records": [
                {
                    "value": "hello",
                    "key": "customer-7",
                    "headers": {"trace": "abc"},
                    "idempotency_key": "order-9",
                },
                {"value_b64": "AAE=", "key_b64": "AQ=="},
            ]
        },
        executor="loop",
    ),
    Operation(
        "read",
        "GET",
        "/v1/topics/{topic}/records",
        "consume",
        True,
        "Read records at offsets >= offset",
        wire.RecordPage,
        query=(
            whole("partition", "Partition", 0),
            whole("offset", "First offset", 0),
            whole("limit", "Most records", limits.read_records_default, 1, limits.read_records_max),
            WAIT,
        ),
        executor="read",
    ),
    Operation(
        "poll",
        "GET",
        "/v1/topics/{topic}/groups/{group}/poll",
        "consume",
        False,
        "Poll a stream group (advances its position)",
        wire.Polled,
        query=(
            whole(
                "max_records",
                "Most records",
                limits.poll_records_default,
                1,
                limits.read_records_max,
            ),
            WAIT,
            START,
        ),
        executor="read",
    ),
    Operation(
        "commit",
        "POST",
        "/v1/topics/{topic}/groups/{group}/commit",
        "consume",
        True,
        "Commit the group's position, or the offsets given",
        wire.GroupOut,
        wire.CommitIn,
        body_required=False,
        query=(START,),
        relations=(PAST_THE_END,),
        example={"offsets": {"0": 1}},
        executor="blocking",
    ),
    Operation(
        "seek",
        "POST",
        "/v1/topics/{topic}/groups/{group}/seek",
        "consume",
        True,
        "Move the group's position on one partition (at most its end)",
        wire.GroupOut,
        wire.SeekIn,
        query=(START,),
        relations=(PAST_THE_END,),
        example={"partition": 0, "offset": 0},
        executor="loop",
    ),
    Operation(
        "describe_group",
        "GET",
        "/v1/topics/{topic}/groups/{group}",
        "consume",
        True,
        "A stream group's positions and lag",
        wire.GroupOut,
        query=(START,),
        executor="loop",
    ),
    Operation(
        "put_queue",
        "PUT",
        QUEUE,
        "consume",
        True,
        "Create a queue group or change its settings (null keeps a setting)",
        wire.QueueOut,
        wire.QueueSettingsIn,
        body_required=False,
        relations=(
            BACKOFF_RELATION,
            (
                "dead_letter_topic is not the queue's own topic",
                r"dead_letter_topic must not be the queue's own topic",
            ),
            (
                "with ordering 'key' (given or stored), concurrency_per_key is 1 or 0",
                r"ordering 'key' leases one record of a key at a time",
            ),
        ),
        query=(
            Param(
                "create",
                "flag",
                "false: only change an existing group (404 if there is none); default true, "
                "which also creates the topic when the key may append to it",
                True,
            ),
        ),
        example={
            "visibility_timeout_ms": 30000,
            "max_attempts": 5,
            "ordering": "key",
            "backoff": {"min_ms": 1000, "factor": 2.0, "max_ms": 300000},
        },
        executor="blocking",
    ),
    Operation(
        "describe_queue",
        "GET",
        QUEUE,
        "consume",
        True,
        "A queue group's settings and records by state (404 if it does not exist)",
        wire.QueueOut,
        executor="blocking",
    ),
    Operation(
        "lease",
        "POST",
        QUEUE + "/lease",
        "consume",
        False,
        "Lease records (long-polls up to wait_ms); answered once durable",
        wire.Jobs,
        wire.LeaseIn,
        body_required=False,
        example={"max_records": 10, "wait_ms": 0},
        executor="blocking",
    ),
    Operation(
        "ack",
        "POST",
        QUEUE + "/ack",
        "consume",
        False,
        "The records are done; results_b64 (one per receipt, or null) are kept for job",
        wire.Settled,
        wire.AckIn,
        example={"receipts": ["0.0.1.1.0123abcd"], "results_b64": ["eyJvayI6IHRydWV9"]},
        executor="blocking",
    ),
    Operation(
        "nack",
        "POST",
        QUEUE + "/nack",
        "consume",
        False,
        "The attempts failed: retry after delay_ms or the backoff",
        wire.Settled,
        wire.NackIn,
        example={
            "receipts": ["0.0.1.1.0123abcd"],
            "delay_ms": 5000,
            "reason": "the mail server said 451",
        },
        executor="blocking",
    ),
    Operation(
        "release",
        "POST",
        QUEUE + "/release",
        "consume",
        False,
        "Give the leases back unused: the attempts are not counted; ready again at once "
        "or after delay_ms",
        wire.Settled,
        wire.NackIn,
        example={
            "receipts": ["0.0.1.1.0123abcd"],
            "delay_ms": 1000,
            "reason": "no task named refund in this worker",
        },
        executor="blocking",
    ),
    Operation(
        "extend",
        "POST",
        QUEUE + "/extend",
        "consume",
        False,
        "Keep the leases ms longer from now",
        wire.Settled,
        wire.ExtendIn,
        example={"receipts": ["0.0.1.1.0123abcd"], "ms": 60000},
        executor="blocking",
    ),
    Operation(
        "discard",
        "POST",
        QUEUE + "/discard",
        "consume",
        False,
        "Dead at once, copied to the dead-letter topic",
        wire.Settled,
        wire.SettleIn,
        example={"receipts": ["0.0.1.1.0123abcd"], "reason": "malformed order"},
        executor="blocking",
    ),
    Operation(
        "trace",
        "GET",
        QUEUE + "/trace",
        "consume",
        True,
        "A record's transitions in the status log",
        wire.Trace,
        query=(
            needed("partition", "The record's partition"),
            needed("offset", "The record's offset"),
        ),
        executor="read",
        call="queue.trace",
    ),
    Operation(
        "job",
        "GET",
        QUEUE + "/job",
        "consume",
        True,
        "Where one record stands in the group: state, attempts, last error, its result "
        "(with wait_ms, answered once it is acked or dead, durably, or the wait ends)",
        wire.JobInfoOut,
        query=(
            needed("partition", "The record's partition"),
            needed("offset", "The record's offset"),
            WAIT,
        ),
        executor="blocking",
    ),
    Operation(
        "cancel_records",
        "POST",
        QUEUE + "/cancel",
        "consume",
        True,
        "Cancel waiting records (those named in records, or every one of key): each that is "
        "ready, delayed or waiting to retry is dead at once with the reason, never delivered "
        "again unless redriven; leased and finished ones are left; idempotent",
        wire.RecordsCancelled,
        wire.CancelIn,
        example={"records": [{"partition": 0, "offset": 12}], "reason": "revoked"},
        executor="blocking",
        call="queue.cancel",
    ),
    Operation(
        "enqueue_unique",
        "POST",
        QUEUE + "/unique",
        "produce",
        False,
        "Append a record unless a live record (waiting, delayed, retrying or leased) of its "
        "identity is in the group: then nothing is appended and that one is answered "
        "(existing). With replace (debounce), waiting ones are cancelled instead and the "
        "record appended. Safe to resend without replace",
        wire.UniqueOut,
        wire.UniqueIn,
        example={"identity": "report:customer-7", "value": "{}", "replace": False},
        executor="blocking",
        call="queue.enqueue_unique",
    ),
    Operation(
        "redrive_queue",
        "POST",
        QUEUE + "/redrive",
        "consume",
        True,
        "Put dead records back to work (all, those named in records, or up to limit); "
        "records that are not dead are left as they are; idempotent",
        wire.Redriven,
        wire.RedriveIn,
        body_required=False,
        example={"limit": 100},
        executor="blocking",
        call="queue.redrive",
    ),
    Operation(
        "dead_errors",
        "GET",
        QUEUE + "/errors",
        "consume",
        True,
        "The errors the group's dead records died of, grouped (by exception type and the "
        "task's innermost frame, or by the reason with its ids masked), most first: how many "
        "are dead, and one whole error of each",
        wire.listing("ErrorGroups", "errors", ErrorGroup),
        executor="read",
        call="queue.dead_errors",
    ),
    Operation(
        "dead_records",
        "GET",
        QUEUE + "/dead",
        "consume",
        True,
        "The dead records of one error group, in the order the group learned of them, a page "
        "at a time (pass the page's last as after)",
        wire.listing("DeadRecords", "records", DeadRecord),
        query=(
            Param("error", "text", "The error group (as dead_errors names it)", required=True),
            Param("after", "position", "The page's place: the last record of the page before"),
            whole(
                "limit",
                "Most records",
                limits.dead_records_page_default,
                low=1,
                cap=limits.read_records_max,
            ),
        ),
        executor="read",
        call="queue.dead_records",
    ),
    Operation(
        "schedule",
        "POST",
        "/v1/timers",
        "produce",
        False,
        'Schedule a timer, or many ({"timers": [...]}); answered once durable',
        wire.Scheduled,
        wire.TimerIn,
        relations=(
            (
                f"at is no more than {_PAST_HOURS} hours ago (an at in seconds, not "
                f"milliseconds, would be) and no more than {_AHEAD_YEARS} years ahead",
                rf"more than {_PAST_HOURS} hours ago|at most {_AHEAD_YEARS} years ahead",
            ),
        ),
        example={
            "topic": "reminders",
            "value": "call back",
            "delay_ms": 60000,
            "timer_id": "call-42",
        },
        executor="blocking",
    ),
    Operation(
        "list_timers",
        "GET",
        "/v1/timers",
        "produce",
        True,
        "Pending timers in order of due time (then id), a page at a time",
        wire.TimersPage,
        query=(
            Param("topic", "text", "Only this topic's timers", pattern=names.USER_NAME_PATTERN),
            whole("due_from_ms", "Only timers due at or after this time (epoch ms)"),
            whole("due_to_ms", "Only timers due before this time (epoch ms)"),
            Param(
                "after",
                "text",
                "The page's place: the `next` of the page before",
                pattern=names.TIMER_CURSOR_PATTERN,
            ),
            whole(
                "limit",
                "Most timers in the page",
                limits.timers_page_default,
                low=1,
                high=limits.timers_page_max,
            ),
        ),
        executor="blocking",
    ),
    Operation(
        "describe_timer",
        "GET",
        "/v1/timers/{timer}",
        "produce",
        True,
        "A timer's state: pending, fired (where) or cancelled",
        wire.TimerOut,
        executor="loop",
    ),
    Operation(
        "cancel_timer",
        "DELETE",
        "/v1/timers/{timer}",
        "produce",
        False,
        "Cancel a pending timer (409 if it fired or was cancelled, 404 if unknown)",
        wire.Cancelled,
        executor="blocking",
    ),
    Operation(
        "stage",
        "PUT",
        STAGED + "/{part}/{chunk}",
        "produce",
        True,
        "Stage records for a publish (durable; nothing is readable until then)",
        wire.Staged,
        wire.StagedRecordsIn,
        query=(PARTITION,),
        binary=(wire.BATCH_TYPE,),
        example={"records": [{"value": "row 1"}, {"value": "row 2", "key": "k"}]},
        executor="blocking",
    ),
    Operation(
        "publish",
        "POST",
        STAGED + "/publish",
        "produce",
        True,
        "Publish what was staged for seq, exactly once; answered once durable",
        Published,
        wire.PublishIn,
        example={"parts": {"task-0": 1}},
        executor="long",
    ),
    Operation(
        "drop_staged",
        "DELETE",
        STAGED,
        "produce",
        True,
        "Drop what was staged for seq (false if it was published)",
        wire.Dropped,
        executor="blocking",
    ),
    Operation(
        "create_joins",
        "POST",
        "/v1/joins",
        "produce",
        True,
        "Make joins: each appends its continuation record once, after every member job "
        "is acked (or fails when one is dead, appending its on_error record); the same "
        "join id with the same definition again changes nothing",
        wire.Joins,
        wire.JoinsIn,
        relations=(
            ("a member gives partition and offset, or join", r"partition and offset, or join"),
            (
                "a member names a join made before or in the same request",
                r"names no join",
            ),
            ("no member is named twice in a join", r"a member is named twice"),
            ("no join id is named twice in one request", r"is named twice in one call"),
            PAST_THE_END,
            ("a join id names one definition", r"exists with another definition"),
            ("the key may use every topic the joins name", r"may not use topic"),
        ),
        example={
            "joins": [
                {
                    "id": "order-42-chord",
                    "members": [
                        {"topic": "tasks.resize", "group": "tasks", "partition": 0, "offset": 7},
                        {"topic": "tasks.resize", "group": "tasks", "partition": 0, "offset": 8},
                    ],
                    "then": {"topic": "tasks.publish", "group": "tasks", "value": "{}"},
                }
            ]
        },
        executor="blocking",
    ),
    Operation(
        "describe_join",
        "GET",
        "/v1/joins/{join}",
        "consume",
        True,
        "Where a join stands (with wait_ms, answered once it ended and, if it fired, its "
        "continuation is appended, or the wait ends)",
        wire.JoinOut,
        query=(WAIT,),
        executor="blocking",
    ),
    Operation(
        "list_schedules",
        "GET",
        "/v1/schedules",
        "admin",
        True,
        "List periodic schedules",
        wire.Schedules,
        executor="loop",
        call="list_schedules",
    ),
    Operation(
        "put_schedule",
        "PUT",
        SCHEDULE,
        "admin",
        True,
        "Create a periodic schedule or replace its definition (a new timing arms it from now)",
        wire.ScheduleOut,
        wire.ScheduleIn,
        relations=(
            ("cron or every_ms is given, one of them", r"needs cron or every_ms"),
            ("cron is a five-field cron expression", r"is not a cron expression"),
            ("tz is an IANA time zone", r"is not a time zone"),
            ("at most schedules_max schedules", r"schedules: delete some first"),
        ),
        example={
            "topic": "tasks.digest",
            "value": '{"task": "digest"}',
            "cron": "*/5 * * * *",
            "tz": "Europe/Berlin",
            "missed": "skip",
        },
        executor="blocking",
        call="put_schedule",
    ),
    Operation(
        "describe_schedule",
        "GET",
        SCHEDULE,
        "admin",
        True,
        "A periodic schedule",
        wire.ScheduleOut,
        executor="loop",
        call="get_schedule",
    ),
    Operation(
        "delete_schedule",
        "DELETE",
        SCHEDULE,
        "admin",
        True,
        "Delete a periodic schedule",
        wire.Deleted,
        executor="blocking",
    ),
    Operation(
        "pause_schedule",
        "POST",
        SCHEDULE + "/pause",
        "admin",
        True,
        "Fire no slot until resumed",
        wire.ScheduleOut,
        executor="blocking",
        call="pause_schedule",
    ),
    Operation(
        "resume_schedule",
        "POST",
        SCHEDULE + "/resume",
        "admin",
        True,
        "Fire again from the next slot after now",
        wire.ScheduleOut,
        executor="blocking",
        call="resume_schedule",
    ),
    Operation(
        "portal_link",
        "POST",
        "/v1/portal",
        "admin",
        False,
        "A short-lived link to the dashboard that shows one tenant its own endpoints "
        "(attempts, test, replay, resend, a new secret, disable, enable) and nothing else",
        PortalLink,
        wire.PortalIn,
        example={"tenant": "c0042", "ttl_s": 3600},
        executor="loop",
    ),
    Operation(
        "list_event_types",
        "GET",
        "/v1/event-types",
        "any",
        True,
        "The event-type catalog: each type, what it means and a JSON Schema of its bodies",
        wire.EventTypes,
        executor="loop",
        call="event_types",
    ),
    Operation(
        "put_event_type",
        "PUT",
        EVENT_TYPE,
        "admin",
        True,
        "Add an event type to the catalog, or change its description or schema "
        "(documentation for receivers: appends are not checked against the schema)",
        EventTypeInfo,
        wire.EventTypeIn,
        body_required=False,
        example={"description": "An invoice was paid", "schema": {"type": "object"}},
        executor="blocking",
        call="put_event_type",
    ),
    Operation(
        "describe_event_type",
        "GET",
        EVENT_TYPE,
        "any",
        True,
        "One event type",
        EventTypeInfo,
        executor="loop",
        call="event_type",
    ),
    Operation(
        "delete_event_type",
        "DELETE",
        EVENT_TYPE,
        "admin",
        True,
        "Remove an event type from the catalog (records carrying it are not touched)",
        wire.Deleted,
        executor="blocking",
        call="delete_event_type",
    ),
    Operation(
        "list_endpoints",
        "GET",
        "/v1/endpoints",
        "admin",
        True,
        "List delivery endpoints (no secrets)",
        wire.Endpoints,
        executor="loop",
    ),
    Operation(
        "put_endpoint",
        "PUT",
        ENDPOINT,
        "admin",
        False,
        "Create a delivery endpoint (url and topics needed) or change its settings; "
        "the answer shows a secret made or given, once",
        EndpointInfo,
        wire.EndpointIn,
        relations=(
            BACKOFF_RELATION,
            (
                "headers may not set host, content-length, content-type, "
                "transfer-encoding, connection, webhook-* or brook-* (the broker's own)",
                r"is set by the broker",
            ),
            (
                "a new endpoint (none has the name) needs url and topics",
                r"a new endpoint needs a url and topics",
            ),
            (
                "a url at a loopback, private or link-local address is refused unless "
                "the broker allows private networks (delivery_allow_private_networks)",
                r"endpoints are called only at public addresses",
            ),
            (
                "a url at a cloud metadata address (169.254.0.0/16 among them) is refused "
                "unless the broker's delivery_allow_networks names it exactly; one outside "
                "those networks, when they are given, is refused too",
                r"delivery_allow_networks",
            ),
            WEAK_SECRET_RELATION,
            ED25519_PAIR_RELATION,
        ),
        example={
            "url": "https://example.com/hooks/orders",
            "topics": ["orders", "payments.*"],
            "max_in_flight": 8,
            "rate_limit_per_s": 50,
        },
        executor="blocking",
    ),
    Operation(
        "describe_endpoint",
        "GET",
        ENDPOINT,
        "admin",
        True,
        "An endpoint's settings",
        EndpointInfo,
        executor="loop",
        call="endpoint.info",
    ),
    Operation(
        "delete_endpoint",
        "DELETE",
        ENDPOINT,
        "admin",
        False,
        "Delete an endpoint and its queue groups",
        wire.Deleted,
        executor="blocking",
        call="delete_endpoint",
        guard="endpoint",
    ),
    Operation(
        "endpoint_stats",
        "GET",
        ENDPOINT + "/stats",
        "admin",
        True,
        "Records by state, in flight, breaker, success rate, latency",
        DeliveryStats,
        executor="read",
        call="endpoint.stats",
    ),
    Operation(
        "endpoint_attempts",
        "GET",
        ENDPOINT + "/attempts",
        "admin",
        True,
        "Every attempt to deliver one record",
        wire.Attempts,
        query=(
            Param("topic", "text", "The record's topic", required=True),
            needed("partition", "The record's partition"),
            needed("offset", "The record's offset"),
        ),
        executor="read",
        call="endpoint.attempts",
    ),
    Operation(
        "message_attempts",
        "GET",
        "/v1/messages/{message}/attempts",
        "admin",
        True,
        "Every endpoint's attempts to deliver one message, by its webhook-id",
        wire.MessageAttemptsOut,
        executor="read",
    ),
    Operation(
        "redrive_endpoint",
        "POST",
        ENDPOINT + "/redrive",
        "admin",
        True,
        "Put dead records back to work (of one topic or all, up to limit, or those named)",
        wire.Redriven,
        wire.EndpointRedriveIn,
        body_required=False,
        example={"topic": "orders", "limit": 100},
        executor="long",
        call="endpoint.redrive",
    ),
    Operation(
        "resend_message",
        "POST",
        ENDPOINT + "/resend",
        "admin",
        False,
        "Send one message to the endpoint once more, by its webhook-id (Brook's "
        "topic:partition:offset, or the record's brook.event-id), whether it was "
        "delivered, dead or still on its way; the receiver gets the same webhook-id",
        Resent,
        wire.ResendIn,
        example={"webhook_id": "orders:0:42"},
        executor="blocking",
        call="endpoint.resend",
    ),
    Operation(
        "replay_endpoint",
        "POST",
        ENDPOINT + "/replay",
        "admin",
        False,
        "Send again records already delivered: those appended from since_ms on (of one "
        "topic or all), or those of topic from offset on (of one partition or each); "
        "records not yet delivered are left as they are",
        wire.Replayed,
        wire.EndpointReplayIn,
        example={"topic": "orders", "since_ms": 1_800_000_000_000},
        relations=(
            (
                "give since_ms or offset, not both",
                r"give one of them",
            ),
            ("offset needs topic", r"needs the topic"),
            ("partition goes with offset", r"partition goes with offset"),
        ),
        executor="long",
        call="endpoint.replay",
    ),
    Operation(
        "enable_endpoint",
        "POST",
        ENDPOINT + "/enable",
        "admin",
        True,
        "Deliver again",
        EndpointInfo,
        executor="blocking",
        call="endpoint.enable",
    ),
    Operation(
        "disable_endpoint",
        "POST",
        ENDPOINT + "/disable",
        "admin",
        True,
        "Stop delivering; records wait",
        EndpointInfo,
        executor="blocking",
        call="endpoint.disable",
    ),
    Operation(
        "test_endpoint",
        "POST",
        ENDPOINT + "/test",
        "admin",
        False,
        "Send a signed test request now and tell how it went",
        wire.TestOut,
        executor="long",
        call="endpoint.test",
    ),
    Operation(
        "rotate_secret",
        "POST",
        ENDPOINT + "/rotate-secret",
        "admin",
        False,
        "A new secret (made, or the one given); the old one signs too for a day",
        wire.Rotated,
        wire.RotateIn,
        relations=(WEAK_SECRET_RELATION, ED25519_PAIR_RELATION),
        body_required=False,
        example={},
        executor="blocking",
        call="endpoint.rotate_secret",
    ),
    Operation(
        "lake_status",
        "GET",
        "/v1/lake",
        "consume",
        True,
        "Where the lake stands: each topic's Parquet files, and per partition how far they "
        "reach and how long the oldest record not in them has waited",
        wire.Lake,
        query=(Param("topic", "text", "Only this topic", pattern=names.USER_NAME_PATTERN),),
        executor="read",
    ),
    Operation(
        "lake_sync",
        "POST",
        "/v1/lake/sync",
        "admin",
        True,
        "Write every acknowledged record not yet in the lake (of one topic, or all) as "
        "Parquet; answers once it is durable (needs a broker serving with --lake)",
        wire.Lake,
        wire.LakeSyncIn,
        body_required=False,
        example={"topic": "orders"},
        executor="long",
    ),
)
ALTERNATIVES: dict[tuple[str, str], tuple[type[msgspec.Struct], type[msgspec.Struct]]] = {
    ("POST", "/v1/timers"): (wire.TimersIn, wire.ScheduledMany),
}
"""A second body shape a route takes, and the answer it gives to that one."""

OPERATIONS: dict[str, Operation] = {op.name: op for op in TABLE}
"""Every operation by name."""
BY_ROUTE: dict[tuple[str, str], Operation] = {(op.method, op.path): op for op in TABLE}
"""Every operation by (method, path template)."""
if len(OPERATIONS) != len(TABLE) or len(BY_ROUTE) != len(TABLE):
    raise ImportError("brook.operations: two operations share a name or a route")


def path_of(name: str, **parameters: str | int) -> str:
    """The path of operation `name` with its parameters filled in, each quoted whole."""
    path = OPERATIONS[name].path
    for key, value in parameters.items():
        path = path.replace("{" + key + "}", quote(str(value), safe=""))
    if "{" in path:
        raise ValueError(f"{name} needs every path parameter: {path}")
    return path
