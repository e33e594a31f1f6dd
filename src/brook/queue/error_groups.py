"""What dead records are grouped by: the reason they died of, less what varies by job.

Grouped by the whole reason, every dead job is a group of its own: a task's message
carries its order id and a nack's text its customer. `error_group(reason)` is the key
a queue group indexes its dead records by (`GroupCore.dead_by_error`), and so what
the dashboard lists, counts and redrives by:

- A task's error summary (`tasks/payload.error_summary`: a first line
  `Type: message`, then `  file:line in function` lines, innermost last) and a Python
  traceback as `traceback.format_exc()` writes it group by the exception type and the
  innermost frame: `ValueError at orders.py:12 in charge`. The message is left out
  (it carries the ids); the file is named without its directory (a deploy moves the
  directory, not the line).
- Any other reason (a nack's free text, a delivery verdict like `503` or
  `404: refused`, `expired: older than expire_after_ms`) groups by its first line
  with the parts that vary masked: quoted text becomes '…', and UUIDs, hex ids (8 or
  more hex digits, one a digit at least; 0x… too) and numbers become N, so
  `no customer 123` and `no customer 456` are one group, `no customer N`. Kept as
  written, because an operator acts on them differently: an HTTP status (a number
  from 100 to 599 opening the line, as delivery verdicts do: `503`, `404: refused`),
  a number of up to 3 digits after a word that announces a code (HTTP, status, code,
  errno, signal, exit: `HTTP 500` and `HTTP 503` are two groups, `[Errno 111]` is
  kept), a line number after `.py:`, and digits inside a word (sha256, utf8, v2).

Pure and total: any text gives a key of at most `error_group_chars_max` characters,
without raising; a free-text key grouped again gives itself back.
"""

from __future__ import annotations

import re

from brook import limits

_SUMMARY_FRAME = re.compile(r"  (?P<file>.+):(?P<line>[0-9]+) in (?P<function>.+)")
_TRACEBACK_FRAME = re.compile(r'\s*File "(?P<file>.+)", line (?P<line>[0-9]+), in (?P<function>.+)')
_TRACEBACK_HEAD = "Traceback (most recent call last):"
_EXCEPTION = re.compile(r"(?P<type>[A-Za-z_][A-Za-z0-9_.]*)(?::.*)?")
"""The line naming the exception: `Type: message`, or the type alone."""

_CODE_WORDS = r"(?i:\b(?:https?(?:/[0-9.]+)?|status(?:_code)?|code|errno|signal|exit(?:_code)?))"
_VARYING = re.compile(
    rf"""
      (?P<code>
          ^[\s:=]*[1-5][0-9][0-9](?![0-9])          # a delivery verdict: 503, 404: refused
        | {_CODE_WORDS}[\s:=]*[0-9]{{1,3}}(?![0-9])  # HTTP 500, status=404, [Errno 111]
        | \.py:[0-9]+                               # a line of code
      )
    | (?P<quoted>(?<![A-Za-z0-9_])(?:'[^'\n]{{1,200}}'|"[^"\n]{{1,200}}"))
    | (?P<id>
          (?<![A-Za-z0-9])[0-9a-fA-F]{{8}}-(?:[0-9a-fA-F]{{4}}-){{3}}[0-9a-fA-F]{{12}}  # a UUID
        | (?<![A-Za-z0-9])0[xX][0-9a-fA-F]+
        | (?<![A-Za-z0-9])(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{{8,}}(?![A-Za-z0-9])
        | (?<![A-Za-z0-9])[0-9]+
      )
    | (?P<word>[A-Za-z][A-Za-z0-9]*)                # digits and all: sha256, utf8, v2
    """,
    re.VERBOSE | re.ASCII,
)
"""What varies from job to job, tried left to right at each place; a code and a word
are consumed as they are, so their digits are never taken for a number."""


def error_group(reason: str) -> str:
    """The group of a dead record that died of `reason` (the module's docstring says
    how it is formed); at most `limits.error_group_chars_max` characters. Never raises."""
    lines = reason.split("\n")
    located = _summary_group(lines) or _traceback_group(lines)
    if located is not None:
        return located[: limits.error_group_chars_max]
    first = next((line for line in lines if line.strip()), "")
    # Masked before it is cut (ids of different lengths then cut it at one place), and
    # again after (a cut through a token may leave one to mask: a key groups as itself).
    masked = _masked(first[: 4 * limits.error_group_chars_max])
    return _masked(masked[: limits.error_group_chars_max]).strip()


def _masked(text: str) -> str:
    return _VARYING.sub(_mask, text)


def _mask(match: re.Match[str]) -> str:
    if match.lastgroup in ("code", "word"):
        return match.group()
    if match.lastgroup == "quoted":
        quote = match.group()[0]
        return f"{quote}…{quote}"
    return "N"


def _summary_group(lines: list[str]) -> str | None:
    """`Type at file:line in function` of a task's error summary, else None."""
    if len(lines) < 2:
        return None
    frame = _SUMMARY_FRAME.fullmatch(lines[-1])
    exception = _EXCEPTION.fullmatch(lines[0])
    if frame is None or exception is None:
        return None
    return _located(exception["type"], frame)


def _traceback_group(lines: list[str]) -> str | None:
    """The same of a Python traceback (`traceback.format_exc()`), else None: its last
    frame, and the exception named on the first unindented line after it."""
    if not lines[0].startswith(_TRACEBACK_HEAD):
        return None
    for at in range(len(lines) - 1, 0, -1):
        frame = _TRACEBACK_FRAME.fullmatch(lines[at])
        if frame is None:
            continue
        after = (line for line in lines[at + 1 :] if line and not line[0].isspace())
        exception = _EXCEPTION.fullmatch(next(after, ""))
        return None if exception is None else _located(exception["type"], frame)
    return None


def _located(exception: str, frame: re.Match[str]) -> str:
    file = re.split(r"[/\\]", frame["file"])[-1]
    return f"{exception} at {file}:{frame['line']} in {frame['function']}"
