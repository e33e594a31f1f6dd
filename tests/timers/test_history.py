"""TimerHistory against the ordered dict of TimerInfo it replaced, as a hypothesis
state machine: the same answers for every id after any mix of remembering (new
ids and repeats), forgetting by age and by count, and the arrays' compaction."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from brook.id_index import Numbers, RowLog
from brook.models import TimerInfo
from brook.timers.history import TimerHistory

IDS = st.text(alphabet="abcxyz019:-", min_size=1, max_size=5)
TOPICS = st.sampled_from(["orders", "reminders", "t.x"])


class HistoryMatchesAnOrderedDict(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.history = TimerHistory(Numbers())
        self.model: OrderedDict[str, TimerInfo] = OrderedDict()
        self.now = 1_000_000

    def _remember(self, info: TimerInfo) -> None:
        self.history.remember(info)
        self.model[info.timer_id] = info
        self.model.move_to_end(info.timer_id)

    @rule(
        timer_id=IDS,
        topic=TOPICS,
        due=st.integers(0, 2**44),
        partition=st.integers(0, 1023),
        offset=st.integers(0, 2**62),
        step=st.integers(0, 5_000),
    )
    def fired(
        self, timer_id: str, topic: str, due: int, partition: int, offset: int, step: int
    ) -> None:
        self.now += step
        self._remember(TimerInfo(timer_id, "fired", topic, due, partition, offset, self.now))

    @rule(timer_id=IDS, topic=TOPICS, due=st.integers(0, 2**44), step=st.integers(0, 5_000))
    def cancelled(self, timer_id: str, topic: str, due: int, step: int) -> None:
        self.now += step
        self._remember(TimerInfo(timer_id, "cancelled", topic, due, at_ms=self.now))

    @rule(count=st.integers(1, 2 * RowLog.COMPACT_ROWS))
    def many(self, count: int) -> None:
        for n in range(count):  # enough rows for the arrays to be compacted
            self.now += 1
            self._remember(TimerInfo(f"bulk-{n}", "fired", "orders", n, 0, n, self.now))

    @precondition(lambda self: len(self.model) > 0)
    @rule(age=st.integers(0, 20_000), most=st.integers(0, 10_000))
    def forget(self, age: int, most: int) -> None:
        horizon = self.now - age
        self.history.forget_old(horizon, most)
        while self.model:
            oldest = next(iter(self.model.values()))
            if len(self.model) <= most and (oldest.at_ms or 0) >= horizon:
                break
            self.model.popitem(last=False)

    @rule(timer_id=IDS)
    def look(self, timer_id: str) -> None:
        assert self.history.get(timer_id) == self.model.get(timer_id)
        assert (timer_id in self.history) == (timer_id in self.model)

    @invariant()
    def same_size(self) -> None:
        assert len(self.history) == len(self.model)
        for timer_id in list(self.model)[-3:]:
            assert self.history.get(timer_id) == self.model[timer_id]


HistoryMatchesAnOrderedDict.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None
)
TestHistoryMatchesAnOrderedDict = HistoryMatchesAnOrderedDict.TestCase
