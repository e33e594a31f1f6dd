"""Structured logs: JSON lines when stderr is not a terminal, readable text when it is."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence

import msgspec

_encode = msgspec.json.Encoder().encode


_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
"""A LogRecord's own attributes; any other was given as `extra` and is logged as a field."""


QUIET = ("httpx", "httpcore", "asyncio", "urllib3")
"""Libraries that log every request at info: kept to warnings when Brook configures
the root logger (a worker's own calls to its broker would be most of its lines)."""


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and name not in entry:
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return _encode(entry).decode()


class TextFormatter(logging.Formatter):
    """For a terminal: time, level, logger, message, and the job a task's line was
    logged in (brook.tasks.JobContext sets `job`)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        job = getattr(record, "job", None)
        if job is not None:
            text += f" [job {job} attempt {getattr(record, 'attempt', '?')}]"
        return text


def setup(
    level: str = "info",
    filters: Sequence[logging.Filter] = (),
    unconfigured_root: bool = False,
) -> None:
    """Log Brook's lines to stderr (JSON lines, or text on a terminal), through
    `filters`. With `unconfigured_root`, the root logger gets the same handler when
    the program configured none, so the lines of a worker's tasks show too."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter() if sys.stderr.isatty() else JsonFormatter())
    for given in filters:
        handler.addFilter(given)
    own = logging.getLogger("brook")
    own.handlers[:] = [handler]
    own.setLevel(level.upper())
    own.propagate = False
    root = logging.getLogger()
    if unconfigured_root and not root.handlers:
        root.addHandler(handler)
        root.setLevel(level.upper())
        for name in QUIET:
            chatty = logging.getLogger(name)
            if chatty.level == logging.NOTSET:
                chatty.setLevel(logging.WARNING)
