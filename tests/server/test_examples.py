"""Every documented example is what the server takes: the request bodies of the OpenAPI
document (brook/operations.py) against a running server, and the JSON of docs/PROTOCOL.md
against the wire contract."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from brook import wire
from brook.operations import OPERATIONS, TABLE
from tests.served import Served

PROTOCOL = Path(__file__).parents[2] / "docs/PROTOCOL.md"
EXAMPLES = [op for op in TABLE if op.example is not None]
PATH_VALUES = {"topic": "orders", "group": "mailer", "endpoint": "shop", "timer": "call-42",
               "writer": "job-1", "seq": "7", "part": "task-0", "chunk": "0", "schedule": "digest",
               "event_type": "invoice.paid"}  # fmt: skip
NOT_BAD_REQUEST = {200, 404, 409}
"""What an example may get: done, or refused for the state it found (a receipt no longer
live, a group not there yet, an offset past a partition's end as its relations say), never
for what it says."""


def test_the_main_operations_have_examples() -> None:
    wanted = {"append", "create_topic", "put_queue", "lease", "schedule", "put_endpoint"}
    assert wanted <= {op.name for op in EXAMPLES}


@pytest.mark.parametrize("operation", EXAMPLES, ids=lambda op: op.name)
def test_each_example_decodes_as_its_body(operation: Any) -> None:
    assert operation.body is not None, operation.name
    wire.decode_request(msgspec.json.encode(operation.example), operation.body)


def test_each_example_is_taken_by_a_running_server(tmp_path: Path) -> None:
    # Private networks allowed: whether an endpoint's address may be called is the
    # broker's setting; the example's URL must only be well formed.
    (tmp_path / "brook.toml").write_text("delivery_allow_private_networks = true\n")
    served = Served(tmp_path / "data", config=tmp_path / "brook.toml")
    try:
        for name in ("create_topic", "append", "put_queue", "stage", "publish"):
            assert OPERATIONS[name] in EXAMPLES  # the order that makes the state they need
        ordered = sorted(EXAMPLES, key=lambda op: op.name not in ("create_topic", "put_queue"))
        for operation in ordered:
            path = re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], operation.path)
            status, answer = served.request(operation.method, path, operation.example)
            if status == 400:  # only for a documented relation with the state it found
                message = answer["error"]["message"]
                assert any(re.search(p, message) for _, p in operation.relations), message
                continue
            assert status in NOT_BAD_REQUEST, (operation.name, status, answer)
    finally:
        served.close()


def protocol_examples() -> list[str]:
    return re.findall(r"```json\n(.*?)```", PROTOCOL.read_text(), flags=re.S)


def test_the_protocols_json_examples_are_the_wire_contract() -> None:
    blocks = protocol_examples()
    assert len(blocks) >= 3
    for block in blocks:
        document = msgspec.json.decode(block)
        if "error" in document:
            msgspec.convert(document, wire.ErrorOut)
        elif "records" in document:
            wire.decode_request(block.encode(), wire.RecordsIn)
        else:
            out = msgspec.convert(document, wire.RecordOut)
            assert out.value is not None and out.value_b64 == out.value.encode()
