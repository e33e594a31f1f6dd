"""Query-string and path numbers, read strictly: a value is plain decimal digits
that fit 63 bits, or the request is a 400 saying which parameter and why.

Python's int() would also take " 5", "+5", "5_000" and any length; an empty
`?offset=` would read as the default. None of those is what a client meant.
"""

from __future__ import annotations

from brook import limits
from brook.errors import BadRequest

WHOLE_MAX = limits.whole_max
"""Offsets, counts and milliseconds are 64-bit signed on the wire and on disk."""
DIGITS_MAX = len(str(WHOLE_MAX))


def whole(text: str, name: str, low: int = 0) -> int:
    """`text` as a whole number of at least `low`."""
    if text.startswith("-") and text[1:].isdigit() and text[1:].isascii():
        raise BadRequest(f"{name} must be at least {low}, not {text}")
    if not (text.isascii() and text.isdigit()):
        shown = "empty" if text == "" else repr(text[:40])
        raise BadRequest(f"{name} must be a whole number, not {shown}")
    if len(text) > DIGITS_MAX or int(text) > WHOLE_MAX:
        raise BadRequest(f"{name} must be at most {WHOLE_MAX}")
    value = int(text)
    if value < low:
        raise BadRequest(f"{name} must be at least {low}, not {value}")
    return value


def number(query: dict[str, str], name: str, default: int | None = None, low: int = 0) -> int:
    """The query parameter `name` as a whole number; `default` when it is absent
    (given but empty is a 400), required when there is no default."""
    text = query.get(name)
    if text is None:
        if default is None:
            raise BadRequest(f"the query parameter {name} is required")
        return default
    return whole(text, name, low)


def whole_or(query: dict[str, str], name: str, default: int | None) -> int | None:
    """The query parameter `name` as a whole number, read as `whole` reads it; `default`
    when it is absent or empty (a form's field left blank: the dashboard's pages)."""
    text = query.get(name)
    return default if not text else whole(text, name)


def flag(query: dict[str, str], name: str, default: bool) -> bool:
    """The query parameter `name` as true or false."""
    text = query.get(name)
    if text is None:
        return default
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise BadRequest(f"{name} must be true or false, not {text[:40]!r}")
