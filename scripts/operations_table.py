"""docs/PROTOCOL.md's table of operations, made from brook/operations.py's rows.

`python scripts/operations_table.py` writes it between its markers in PROTOCOL.md;
`--check` fails when the doc's table is not the table's (tests/test_operations.py runs
it), so the routes, scopes, query parameters, defaults and caps the doc shows are the
ones the server reads.
"""

from __future__ import annotations

import sys
from pathlib import Path

from brook.operations import TABLE, Operation

DOC = Path(__file__).resolve().parents[1] / "docs" / "PROTOCOL.md"
BEGIN = "<!-- operations: made by scripts/operations_table.py from brook/operations/ -->"
END = "<!-- end of operations -->"


def _query(operation: Operation) -> str:
    parts = []
    for param in operation.query:
        notes = [] if param.default is None else [f"default {str(param.default).lower()}"]
        if param.required:
            notes.append("required")
        if param.cap is not None:
            notes.append(f"capped at {param.cap}")
        if param.high is not None:
            notes.append(f"at most {param.high}")
        if param.choices:
            notes.append(" or ".join(param.choices))
        parts.append(f"`{param.name}`" + (f" ({', '.join(notes)})" if notes else ""))
    return ", ".join(parts)


def _shapes(operation: Operation) -> str:
    body = operation.body.__name__ if operation.body is not None else ""
    answer = operation.answer.__name__ if operation.answer is not None else "text or JSON"
    return f"{body} → {answer}" if body else answer


def render() -> str:
    rows = [
        "| operation | route | scope | query | body → answer | resent | runs on | served by |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for op in TABLE:
        served = f"`{op.call}`" if op.call else "its own handler"
        rows.append(
            f"| `{op.name}` | `{op.method} {op.path}` | {op.scope or 'open'} | {_query(op)} "
            f"| {_shapes(op)} | {'yes' if op.retry_safe else 'no'} | {op.executor} | {served} |"
        )
    return "\n".join([BEGIN, *rows, END])


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    wanted = text[:start] + render() + text[end:]
    if "--check" in argv:
        if wanted != text:
            print("docs/PROTOCOL.md's table of operations is not the rows' (brook/operations/):")
            print("  run `make generate`")
            return 1
        return 0
    DOC.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
