"""The writer role of a read-only broker: there is none, so every write is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brook.commit.requests import AppendRequest
from brook.errors import ReadOnly
from brook.records import Ack
from brook.stats import CommitStats

_REFUSAL = (
    "this broker was opened read-only (read_only=True): it cannot append, create, delete or "
    "change anything; write through the broker that owns the storage"
)


class RefusingCommitter:
    """Stands where a broker's Committer does, with its methods, and refuses each write."""

    def __init__(self) -> None:
        self.stats = CommitStats()

    def append(self, request: AppendRequest) -> list[Ack]:
        raise ReadOnly(_REFUSAL)

    def submit(self, request: AppendRequest) -> None:
        raise ReadOnly(_REFUSAL)

    def call(self, fn: Callable[[], Any]) -> Any:
        raise ReadOnly(_REFUSAL)

    def close(self) -> None:
        """Nothing runs, so nothing to stop."""
