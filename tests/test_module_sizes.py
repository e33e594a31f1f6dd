"""No module of Brook is longer than a reader can hold: 700 lines. A module that grows
past it is split by what it does (the queue group's and the worker's rooms, the wire
and the table by resource), not cut at a line."""

from __future__ import annotations

from pathlib import Path

import brook

LINES_MAX = 700
EXEMPT = {
    "limits.py": "every bound and default in one file, in sections per subsystem, with the "
    "relations between them checked after all of them (as TigerBeetle keeps constants.zig)",
}


def test_no_module_is_longer_than_a_reader_can_hold() -> None:
    root = Path(brook.__file__).parent
    long = {
        str(path.relative_to(root)): lines
        for path in sorted(root.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > LINES_MAX
    }
    assert set(long) == set(EXEMPT), f"modules over {LINES_MAX} lines: {long}"
