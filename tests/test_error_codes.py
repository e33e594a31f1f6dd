"""docs/PROTOCOL.md lists every error code the server can answer with, and its status."""

from __future__ import annotations

import re
from pathlib import Path

from brook import errors
from brook.errors import BrookError

PROTOCOL = Path(__file__).parents[1] / "docs" / "PROTOCOL.md"


def every_error() -> list[type[BrookError]]:
    found: list[type[BrookError]] = []
    pending: list[type[BrookError]] = [BrookError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_every_code_is_in_the_errors_table_with_its_status() -> None:
    text = PROTOCOL.read_text()
    table = text[text.index("## Errors") :]
    rows = {}
    for line in table.splitlines():
        match = re.match(r"\| (\d{3}) \| (.+?) \|", line)
        if match:
            for code in re.findall(r"`(\w+)`", match.group(2)):
                rows[code] = int(match.group(1))
    # Errors that only clients raise (the server never answers with them).
    client_side = {errors.Unavailable.code}
    for cls in every_error():
        if cls.code in client_side:
            continue
        assert rows.get(cls.code) == cls.status, f"{cls.__name__} ({cls.code}, {cls.status})"
