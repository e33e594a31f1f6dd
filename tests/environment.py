"""Environments for the processes tests start."""

from __future__ import annotations

import os


def unmeasured() -> dict[str, str]:
    """This process's environment without coverage's, for children that coverage would
    only slow down: those killed with SIGKILL (they never write their data) and Spark's
    JVMs and Python workers (minutes slower; the same code is measured in-process)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
