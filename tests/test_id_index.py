"""IdIndex against a dict, as a hypothesis state machine."""

from __future__ import annotations

import tracemalloc

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from brook.id_index import IdIndex

IDS = st.text(alphabet="abcxyz019:-", min_size=1, max_size=6)


class IndexMatchesADict(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.index = IdIndex()
        self.model: dict[str, int] = {}

    @rule(timer_id=IDS, value=st.integers(0, 2**64 - 1))
    def put(self, timer_id: str, value: int) -> None:
        self.index[timer_id] = value
        self.model[timer_id] = value

    @rule(timer_id=IDS)
    def pop(self, timer_id: str) -> None:
        assert self.index.pop(timer_id) == self.model.pop(timer_id, None)

    @rule(timer_id=IDS)
    def look(self, timer_id: str) -> None:
        assert self.index.get(timer_id) == self.model.get(timer_id)
        assert (timer_id in self.index) == (timer_id in self.model)

    @rule(count=st.integers(1, 3000))
    def many(self, count: int) -> None:
        for n in range(count):  # makes the table grow, with tombstones left behind
            self.index[f"bulk-{n}"] = n
            self.model[f"bulk-{n}"] = n
        for n in range(0, count, 2):
            assert self.index.pop(f"bulk-{n}") == self.model.pop(f"bulk-{n}")

    @invariant()
    def same_size_and_values(self) -> None:
        assert len(self.index) == len(self.model)
        assert sorted(self.index.values()) == sorted(self.model.values())


IndexMatchesADict.TestCase.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None
)
TestIndexMatchesADict = IndexMatchesADict.TestCase


def test_growing_costs_the_new_table_and_no_object_per_entry() -> None:
    index = IdIndex()
    names = [f"key-{n}" for n in range(300_000)]
    for n, name in enumerate(names):
        index.add(name, n, n % 7)
        if n > 100_000 and 2 * (index._used + 1) > len(index._high):
            break  # the next add grows the table
    count = len(index)
    tracemalloc.start()
    try:
        index.add("one more", count)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    table = 28 * len(index._high)  # four arrays: 8 + 8 + 8 + 4 bytes a slot
    assert peak < table + 100_000, f"{peak / count:.0f} bytes an entry at the peak"
    assert all(index.entry(name) == (n, n % 7) for n, name in enumerate(names[:count]))
    assert index.get("one more") == count and len(index) == count + 1
