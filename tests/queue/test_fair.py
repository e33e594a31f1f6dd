"""Turns across keys: no key starves another, and ordered keys go one record at a time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.queue.fair import FairQueue


def test_a_hot_key_cannot_starve_the_others() -> None:
    """The issue's case: 100,000 records of one key, 10 of each of 100 others, and
    every other key has its first record out within the first 1,000."""
    queue: FairQueue[int] = FairQueue()
    offset = 0
    for _ in range(100_000):
        queue.add("hot", offset)
        offset += 1
    for key in range(100):
        for _ in range(10):
            queue.add(key, offset)
            offset += 1
    first_seen: dict[object, int] = {}
    for lease in range(1_000):
        popped = queue.pop()
        assert popped is not None
        first_seen.setdefault(popped[0], lease)
    assert all(key in first_seen for key in range(100))
    assert max(first_seen[key] for key in range(100)) < 1_000


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.booleans()), min_size=1, max_size=200))
def test_ordered_keys_are_leased_one_at_a_time_in_order(plan: list[tuple[str, bool]]) -> None:
    """Workers take records and either finish them or fail them (back to the front);
    per key, what is taken is always the lowest unfinished offset, one at a time."""
    queue: FairQueue[int] = FairQueue(ordered=True)
    pending: dict[str, list[int]] = {}
    for offset, (key, _) in enumerate(plan):
        queue.add(key, offset)
        pending.setdefault(key, []).append(offset)
    out: dict[str, int] = {}
    fails = iter([fail for _, fail in plan] * 3)
    while len(queue) or out:
        popped = queue.pop()
        if popped is None:
            key, offset = next(iter(out.items()))  # finish or fail something that is out
            del out[key]
            if next(fails, False):
                queue.put_back(key, offset)
            else:
                assert pending[key][0] == offset
                pending[key].pop(0)
                queue.release(key)
            continue
        key, offset = popped
        assert isinstance(key, str)
        assert key not in out, "two records of one key out at once"
        assert offset == pending[key][0], "a key's records out of order"
        out[key] = offset
    assert all(not offsets for offsets in pending.values())


def test_unordered_retries_take_turns_with_first_attempts() -> None:
    queue: FairQueue[str] = FairQueue()
    for item in ("a1", "a2"):
        queue.add("a", item)
    queue.add("b", "b1")
    assert queue.pop() == ("a", "a1")
    queue.put_back("a", "a1")
    assert [queue.pop() for _ in range(3)] == [("b", "b1"), ("a", "a2"), ("a", "a1")]
    assert queue.pop() is None and len(queue) == 0


def test_a_retry_backlog_does_not_starve_new_records() -> None:
    """After an outage every record is a retry; records new since still get every
    other turn, not a place behind the whole backlog."""
    queue: FairQueue[str] = FairQueue()
    for n in range(1000):
        queue.put_back(None, f"retry{n}")
    for n in range(10):
        queue.add(None, f"new{n}")
    first = [queue.pop() for _ in range(20)]
    assert all(popped is not None and popped[0] is None for popped in first)
    assert sorted(item for _, item in first if item.startswith("new")) == [
        f"new{n}" for n in range(10)
    ]
    assert len(queue) == 1000 - 10
