"""How the `brook` command line reports errors: one clear line and a non-zero
exit, never a traceback."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import click

from brook import errors
from brook.errors import BrookError


def friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn Brook's errors raised by a command into one line and exit status 1."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrookError as exc:
            raise click.ClickException(f"{exc.code}: {exc.message}") from None

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def spark_error_message(exc: Exception) -> str:
    """One line for a failed Spark job: Brook's own error when it raised one inside
    Spark (its message is buried in a Python traceback), else Spark's first line."""
    text = str(exc)
    found = re.findall(r"brook\.errors\.(\w+): ([^\n]*)", text)
    if found:
        name, message = found[-1]
        error = getattr(errors, name, None)
        code = error.code if isinstance(error, type) and issubclass(error, BrookError) else name
        return f"{code}: {message}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
