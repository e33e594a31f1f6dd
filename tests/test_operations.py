"""The HTTP API is one table (brook/operations.py): the router serves its routes at its
scopes, the clients call its paths, and a path made for an operation leads back to it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook import api, names
from brook.client import protocol
from brook.models import JoinContinuation, JoinMember, JoinSpec, TimerSpec
from brook.operations import BY_ROUTE, OPERATIONS, PATH_PARAMETERS, TABLE, path_of
from brook.server.router import Router


def _router() -> Router:
    router = Router()
    for operation in TABLE:

        async def handler(operation: Any = operation) -> Any:
            return operation

        router.serve(operation, handler)
    return router


ROUTER = _router()
VALUES = {
    "topic": st.from_regex(names.USER_NAME_PATTERN, fullmatch=True),
    "group": st.from_regex(names.USER_NAME_PATTERN, fullmatch=True),
    "endpoint": st.from_regex(names.USER_NAME_PATTERN, fullmatch=True),
    "schedule": st.from_regex(PATH_PARAMETERS["schedule"]["pattern"], fullmatch=True),
    "timer": st.from_regex(names.ID_PATTERN, fullmatch=True),
    "join": st.from_regex(names.ID_PATTERN, fullmatch=True),
    "writer": st.from_regex(names.ID_PATTERN, fullmatch=True),
    "part": st.from_regex(names.ID_PATTERN, fullmatch=True),
    "message": st.from_regex(PATH_PARAMETERS["message"]["pattern"], fullmatch=True),
    "event_type": st.from_regex(PATH_PARAMETERS["event_type"]["pattern"], fullmatch=True),
    "seq": st.integers(0, PATH_PARAMETERS["seq"]["maximum"]),
    "chunk": st.integers(0, PATH_PARAMETERS["chunk"]["maximum"]),
}


def test_every_path_parameter_has_a_schema_and_values() -> None:
    used = {part[1:-1] for op in TABLE for part in op.path.split("/") if part.startswith("{")}
    assert used == set(PATH_PARAMETERS) == set(VALUES)


@pytest.mark.parametrize("name", sorted(OPERATIONS))
@settings(max_examples=25)  # per operation: about a thousand paths in all
@given(data=st.data())
def test_a_path_made_for_an_operation_is_routed_back_to_it(name: str, data: st.DataObject) -> None:
    operation = OPERATIONS[name]
    wanted = [part[1:-1] for part in operation.path.split("/") if part.startswith("{")]
    values = {key: data.draw(VALUES[key], label=key) for key in wanted}
    # The server unquotes the path before it routes it (server/http.py).
    route, found = ROUTER.match(operation.method, unquote(path_of(name, **values)))
    assert (route.template, route.scope) == (operation.path, operation.scope)
    assert found == {key: str(value) for key, value in values.items()}


def test_a_path_without_its_parameters_is_refused() -> None:
    with pytest.raises(ValueError, match="every path parameter"):
        path_of("read")


def test_reads_are_safe_to_send_again() -> None:
    assert all(op.retry_safe for op in TABLE if op.method == "GET" and op.name != "poll")
    assert not OPERATIONS["poll"].retry_safe, "a poll moves the group's position"


RECEIPT = "0.0.1.1.0123abcd"
CALLS = [
    ("create_topic", protocol.request("create_topic", "t", partitions=1)),
    ("list_topics", protocol.request("list_topics")),
    ("lake_status", protocol.request("lake_status", topic="t")),
    ("lake_sync", protocol.request("lake_sync")),
    ("delete_topic", protocol.request("delete_topic", "t")),
    ("describe_topic", protocol.end_offsets("t")),
    ("append", protocol.append("t", b"v", None, None, None)),
    ("read", protocol.read("t", 0, 0, 10)),
    ("poll", protocol.poll("t", "g", "earliest", 10, 0)),
    ("commit", protocol.commit("t", "g", "earliest", None)),
    ("seek", protocol.seek("t", "g", "earliest", 0, 0)),
    ("describe_group", protocol.group("t", "g", "earliest")),
    ("stage", protocol.stage("t", "w", 1, "p", 0, [], None)),
    ("publish", protocol.publish("t", "w", 1, {"p": 1})),
    ("drop_staged", protocol.drop_staged("t", "w", 1)),
    ("put_queue", protocol.queue_settings("t", "g")),
    ("describe_queue", protocol.queue_state("t", "g", "stats")),
    ("lease", protocol.lease("t", "g", 1, 0, None)),
    ("ack", protocol.settle("t", "g", "ack", [RECEIPT])),
    ("nack", protocol.settle("t", "g", "nack", [RECEIPT])),
    ("release", protocol.settle("t", "g", "release", [RECEIPT], delay_ms=100)),
    ("extend", protocol.settle("t", "g", "extend", [RECEIPT], ms=10)),
    ("discard", protocol.settle("t", "g", "discard", [RECEIPT])),
    ("trace", protocol.request("trace", "t", "g", partition=0, offset=0)),
    ("job", protocol.job("t", "g", 0, 0)),
    ("enqueue_unique", protocol.request("enqueue_unique", "t", "g", identity="id-1", value=b"v")),
    (
        "create_joins",
        protocol.create_joins(
            [
                JoinSpec(
                    id="j",
                    members=[JoinMember(topic="t", group="g", partition=0, offset=0)],
                    then=JoinContinuation(topic="u", group="g", value=b"v"),
                )
            ]
        ),
    ),
    ("describe_join", protocol.join("j", timeout=1)),
    ("redrive_queue", protocol.request("redrive_queue", "t", "g")),
    ("cancel_records", protocol.request("cancel_records", "t", "g", records=[(0, 1)])),
    ("dead_errors", protocol.request("dead_errors", "t", "g")),
    ("dead_records", protocol.request("dead_records", "t", "g", error="E", after=(0, 1))),
    ("list_timers", protocol.request("list_timers", topic="t", due_from_ms=0, after="1:tm")),
    ("describe_timer", protocol.timer("tm")),
    ("cancel_timer", protocol.cancel_timer("tm")),
    ("put_schedule", protocol.request("put_schedule", "s", topic="t", value=b"v", every_ms=1_000)),
    ("list_schedules", protocol.request("list_schedules")),
    ("describe_schedule", protocol.request("describe_schedule", "s")),
    ("pause_schedule", protocol.request("pause_schedule", "s")),
    ("resume_schedule", protocol.request("resume_schedule", "s")),
    ("delete_schedule", protocol.delete_schedule("s")),
    ("put_endpoint", protocol.request("put_endpoint", "e", url="https://example.com/")),
    ("list_endpoints", protocol.request("list_endpoints")),
    ("describe_endpoint", protocol.request("describe_endpoint", "e")),
    ("delete_endpoint", protocol.request("delete_endpoint", "e")),
    ("endpoint_stats", protocol.request("endpoint_stats", "e")),
    (
        "endpoint_attempts",
        protocol.request("endpoint_attempts", "e", topic="t", partition=0, offset=0),
    ),
    ("message_attempts", protocol.request("message_attempts", "t:0:1")),
    ("redrive_endpoint", protocol.request("redrive_endpoint", "e")),
    ("replay_endpoint", protocol.request("replay_endpoint", "e", since_ms=0)),
    ("resend_message", protocol.request("resend_message", "e", webhook_id="t:0:1")),
    ("list_event_types", protocol.request("list_event_types")),
    ("portal_link", protocol.request("portal_link", tenant="c1", ttl_s=3600)),
    ("put_event_type", protocol.request("put_event_type", "a.b")),
    ("describe_event_type", protocol.request("describe_event_type", "a.b")),
    ("delete_event_type", protocol.request("delete_event_type", "a.b")),
    ("enable_endpoint", protocol.request("enable_endpoint", "e")),
    ("disable_endpoint", protocol.request("disable_endpoint", "e")),
    ("test_endpoint", protocol.request("test_endpoint", "e")),
    ("rotate_secret", protocol.request("rotate_secret", "e")),
]


@pytest.mark.parametrize(("name", "call"), CALLS, ids=[name for name, _ in CALLS])
def test_each_client_call_is_its_operation(name: str, call: protocol.Call) -> None:
    route, _ = ROUTER.match(call.method, unquote(call.path))
    assert BY_ROUTE[(call.method, route.template)].name == name


def test_the_clients_call_every_operation_but_the_servers_own() -> None:
    """Those of their own by CALLS; a generic row by the method made from it
    (scripts/client_calls.py, whose file make lint holds to the rows)."""
    generic = {op.name for op in OPERATIONS.values() if (op.call or op.client) is not None}
    called = {name for name, _ in CALLS} | generic | {"schedule"}
    assert set(OPERATIONS) - called == {"health", "metrics", "openapi"}


def test_calls_safe_only_by_what_they_carry_say_so() -> None:
    """An append is resent only when every record has an idempotency key, a schedule
    only when every timer is named, an endpoint's PUT only with the secret given."""
    assert not protocol.append("t", b"v", None, None, None).retry_safe
    assert protocol.append("t", b"v", None, None, "k").retry_safe
    timer = TimerSpec("t", b"v", None, 1000, None, None, None)
    assert not protocol.schedule_many([timer]).retry_safe
    named = TimerSpec("t", b"v", None, 1000, None, None, "a")
    assert protocol.schedule_many([named, named]).retry_safe
    assert not protocol.request("put_endpoint", "e", url="https://example.com/").retry_safe
    assert protocol.request("put_endpoint", "e", secret="whsec_" + "A" * 32).retry_safe


def test_each_facade_call_is_a_method_of_the_api() -> None:
    """A row's call (served by server/adapter.py, called by protocol.request) names a
    method of the API both brokers give (brook/api.py): the broker's or a handle's."""
    owners = {"": api.BrokerApi, "queue": api.QueueApi, "endpoint": api.EndpointApi}
    called = [op for op in TABLE if op.call is not None]
    assert len(called) >= 25
    for operation in called:
        assert operation.call is not None
        owner, _, method = operation.call.rpartition(".")
        assert callable(getattr(owners[owner], method, None)), operation.name
        assert operation.guard in (None, "endpoint", "schedule", "whole_broker"), operation.name


def test_each_operation_runs_where_it_says() -> None:
    assert {op.executor for op in TABLE} <= {"loop", "read", "blocking", "long"}
    assert OPERATIONS["lake_sync"].executor == "long", "a sync writes Parquet for seconds"
    assert OPERATIONS["append"].executor == "loop", "the committer answers appends"


def test_the_protocols_table_of_operations_is_made_from_the_rows() -> None:
    script = Path(__file__).parents[1] / "scripts" / "operations_table.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_the_clients_generic_calls_are_made_from_the_rows() -> None:
    script = Path(__file__).parents[1] / "scripts" / "client_calls.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
