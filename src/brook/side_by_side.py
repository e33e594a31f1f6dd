"""Start-up work done side by side where the storage makes it wait.

Opening a broker reads every topic, status log, endpoint and recent record once. On a
local disk that work is the interpreter's, and threads only contend for it; on an
object store each read waits about a round trip, so a broker with a thousand topics
would wait a thousand round trips one after another (a take-over, and clients without a
broker, for as long). A storage says how many reads are worth waiting on at once
(`open_threads`); this module spreads the work over that many threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from brook.storage import Storage

T = TypeVar("T")
R = TypeVar("R")


def each(
    storage: Storage,
    items: Sequence[T],
    work: Callable[[T], R],
    keep: Callable[[R], None],
    name: str = "brook-open",
) -> None:
    """Run `work` on every item, up to `storage.open_threads` at once, and hand each
    result to `keep` in the items' order, in the calling thread. Every item is worked on
    even when one fails: the first failure is raised after the others are kept, so the
    caller can close what was opened."""
    threads = min(storage.open_threads, len(items))
    if threads <= 1:
        results = [_attempt(work, item) for item in items]
    else:
        with ThreadPoolExecutor(threads, name) as pool:
            results = list(pool.map(lambda item: _attempt(work, item), items))
    failure: Exception | None = None
    for result, problem in results:
        if problem is not None:
            failure = failure or problem
        else:
            keep(result)  # type: ignore[arg-type]
    if failure is not None:
        raise failure


def _attempt(work: Callable[[T], R], item: T) -> tuple[R | None, Exception | None]:
    try:
        return work(item), None
    except Exception as exc:  # raised by `each` once every item had its turn
        return None, exc
