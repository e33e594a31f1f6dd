"""IdIndex against a dict, as a hypothesis state machine."""

from __future__ import annotations

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
