"""The async client's calls of the generic operations (client/aio_calls.py), made from
the table's rows (brook/operations/) and the API's Protocols (brook/api.py).

A row that names its facade call (`put_schedule`, `queue.trace`, `endpoint.stats`) is
served by the one generic adapter and called by the one generic client call
(`protocol.request`), so its client method says nothing the row and the Protocol do not:
its signature is the Protocol's, its path parameters are its first arguments (or the
handle's topic and group, or endpoint name), the rest go as keywords, and what it
returns is cast to the Protocol's type. This script writes those methods, as mixins of
AsyncBroker, AsyncQueue and AsyncEndpoint; unasync makes the sync ones from them.
An operation is then a row, a facade method, a Protocol line and a CLI command.

`python scripts/client_calls.py` writes aio_calls.py; `--check` (run by `make lint`)
fails when the file is not what the rows and Protocols make.
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

from brook.operations import TABLE, Operation

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "src/brook/api.py"
TARGET = ROOT / "src/brook/client/aio_calls.py"
LINE = 100


class Owner(NamedTuple):
    """Whose methods a row's call is: the broker's, or a handle's."""

    protocol: str
    mixin: str
    self_type: str
    broker: str
    path: tuple[str, ...]
    """What fills the path's parameters, for a handle (its own names)."""


OWNERS = {
    "": Owner("BrokerApi", "AsyncBrokerCalls", "AsyncBroker", "self", ()),
    "queue": Owner("QueueApi", "AsyncQueueCalls", "AsyncQueue", "self._broker", ("topic", "group")),
    "endpoint": Owner(
        "EndpointApi", "AsyncEndpointCalls", "AsyncEndpoint", "self._broker", ("name",)
    ),
}
HEADER = '''"""The async client's calls of the operations the table serves generically, made by
scripts/client_calls.py from brook/operations/ and brook/api.py: change the row or the
Protocol, never this file, then run `make generate`.
"""
'''


def _protocols() -> tuple[dict[str, dict[str, ast.FunctionDef]], dict[str, str]]:
    """api.py's Protocols' methods by class and name, and where it imports each name from."""
    tree = ast.parse(API.read_text())
    methods: dict[str, dict[str, ast.FunctionDef]] = {}
    imported: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            methods[node.name] = {
                item.name: item for item in node.body if isinstance(item, ast.FunctionDef)
            }
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imported[alias.asname or alias.name] = node.module
    return methods, imported


def _names(*nodes: ast.AST | None) -> set[str]:
    return {
        sub.id
        for node in nodes
        if node is not None
        for sub in ast.walk(node)
        if isinstance(sub, ast.Name)
    }


def _docstring(text: str) -> str:
    """`text` as a method's docstring, wrapped at the house's width."""
    indent = " " * 8
    lines = textwrap.wrap(" ".join(text.split()), LINE - len(indent) - 6)
    if len(lines) == 1:
        return f'{indent}"""{lines[0]}"""\n'
    lines[0] = '"""' + lines[0]
    return "".join(f"{indent}{line}\n" for line in lines[:-1]) + f'{indent}{lines[-1]}"""\n'


def _method(row: Operation, owner: Owner, method: ast.FunctionDef) -> tuple[str, set[str]]:
    """The source of one client method, and the names its signature uses."""
    name, path, summary = row.name, row.path, row.summary
    arguments = method.args
    params = [*arguments.args[1:], *arguments.kwonlyargs]
    if owner.path:
        given = [f"self.{field}" for field in owner.path]
    else:
        given = [param.arg for param in params[: len(re.findall(r"\{\w+\}", path))]]
    keywords = [f"{param.arg}={param.arg}" for param in params if param.arg not in given]
    call = ", ".join([repr(name), *given, *keywords])
    doc = ast.get_docstring(method) or f"{summary}."
    returns = method.returns
    if isinstance(returns, ast.Constant) and returns.value is None:
        body = f"await {owner.broker}._do(protocol.request({call}))"
    else:
        body = f"return await {owner.broker}._ask({ast.unparse(returns or ast.Constant(None))}, {call})"
    signature = ast.unparse(arguments)
    signature = signature.replace("self", f"self: {owner.self_type}", 1)
    result = "None" if returns is None else ast.unparse(returns)
    source = (
        f"    async def {method.name}({signature}) -> {result}:\n{_docstring(doc)}        {body}\n"
    )
    defaults = [*arguments.defaults, *arguments.kw_defaults]
    used = _names(returns, *(param.annotation for param in params), *defaults)
    return source, used


def render() -> str:
    methods, imported = _protocols()
    classes: dict[str, list[str]] = {owner.mixin: [] for owner in OWNERS.values()}
    used: set[str] = set()
    for row in TABLE:
        call = row.call or row.client
        if call is None:
            continue
        handle, _, name = call.rpartition(".")
        owner = OWNERS[handle]
        source, names = _method(row, owner, methods[owner.protocol][name])
        classes[owner.mixin].append(source)
        used |= names
    lines = [HEADER, "from __future__ import annotations\n", "from typing import TYPE_CHECKING\n"]
    lines.append("from brook.client import protocol\n")
    for name in sorted(used):
        module = imported.get(name)
        if module is None:
            continue  # a builtin
        lines.append(f"from {module} import {name}\n")
    lines.append("if TYPE_CHECKING:\n")
    lines.append("    from brook.client.aio import AsyncBroker\n")
    lines.append("    from brook.client.aio_handles import AsyncEndpoint, AsyncQueue\n")
    for owner in OWNERS.values():
        lines.append(
            f"\n\nclass {owner.mixin}:\n"
            f'    """What {owner.self_type} calls through the table\'s generic operations."""\n\n'
        )
        lines.append("\n".join(classes[owner.mixin]))
    return "".join(lines)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT / "scripts"))
    from unasync import formatted

    made = formatted(render(), TARGET)
    if "--check" not in argv:
        TARGET.write_text(made)
    elif not TARGET.exists() or TARGET.read_text() != made:
        print(
            f"{TARGET.relative_to(ROOT)} is not what the rows and api.py make: "
            "run `make generate` (edit the row or the Protocol, never aio_calls.py)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
