"""The rows of queue groups, unique records and joins."""

from __future__ import annotations

from brook import limits, wire
from brook.models import DeadRecord
from brook.operations.rows import (
    BACKOFF_RELATION,
    ERROR_GROUPS,
    PAST_THE_END,
    QUEUE,
    WAIT,
    Operation,
    Param,
    needed,
    whole,
)

ROWS: tuple[Operation, ...] = (
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
        ERROR_GROUPS,
        executor="read",
        call="queue.dead_errors",
    ),
    Operation(
        "dead_records",
        "GET",
        QUEUE + "/dead",
        "consume",
        True,
        "The dead records of one error group, in order of their place (partition, offset), a page "
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
            (
                "a member naming a join waits for what that join appends: that join has a then",
                r"names a join that appends nothing",
            ),
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
)
