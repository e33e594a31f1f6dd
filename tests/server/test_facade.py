"""The server and the dashboard see the broker only through its facade: the import
contracts (pyproject.toml) keep them from importing the broker's parts, and this
keeps them from reaching the parts through the Broker they are handed."""

from __future__ import annotations

import ast
from pathlib import Path

import brook.server

PARTS = {
    "core", "queues", "timers", "staging", "endpoint_store", "delivery", "groups",
    "storage", "supervisor", "lake", "joins", "schedules",
}  # fmt: skip
"""Broker's attributes that hold its parts (tests and the broker itself use them)."""


def reaches_into_broker(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr in PARTS):
            continue
        owner = node.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if name == "broker":
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_finds_a_reach_into_the_broker() -> None:
    tree = ast.parse("self.api.broker.core.topic_state(t)\nbroker.queues.find(t, g)")
    assert len(reaches_into_broker(tree)) == 2
    assert reaches_into_broker(ast.parse("broker.find_queue(t, g)\nstate.core")) == []


def test_no_shell_module_reaches_into_the_broker() -> None:
    root = Path(brook.server.__file__).parent
    reaches = {
        str(path.relative_to(root)): found
        for path in sorted(root.rglob("*.py"))
        if (found := reaches_into_broker(ast.parse(path.read_text())))
    }
    assert reaches == {}
