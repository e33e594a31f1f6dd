"""The ticker's book of due times: a group is popped once when its latest due time
comes, never for a time it was moved from, and never after it was forgotten."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.queue.due import DueTimes

SUBJECTS = st.sampled_from("abcdef")
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), SUBJECTS, st.none() | st.integers(0, 100)),
        st.tuples(st.just("forget"), SUBJECTS, st.none()),
        st.tuples(st.just("pop"), st.none(), st.integers(0, 100)),
    ),
    max_size=200,
)


@given(STEPS)
def test_due_times_pop_what_a_plain_dictionary_says_is_due(steps: list[tuple]) -> None:
    book: DueTimes[str] = DueTimes()
    model: dict[str, int] = {}
    for verb, subject, value in steps:
        if verb == "set":
            book.set(subject, value)
            if value is None:
                model.pop(subject, None)
            else:
                model[subject] = value
        elif verb == "forget":
            book.forget(subject)
            model.pop(subject, None)
        else:
            due = sorted((at, s) for s, at in model.items() if at <= value)
            assert sorted(book.pop_due(value)) == sorted(s for _, s in due)
            for _, s in due:
                del model[s]
        assert book.next_ms() == min(model.values(), default=None)
        assert len(book) == len(model)


def test_set_says_when_a_subject_is_due_before_all_others() -> None:
    """So a sleeping ticker is woken only when its plan must change."""
    book: DueTimes[str] = DueTimes()
    assert book.set("a", 100)
    assert not book.set("b", 200)
    assert not book.set("a", 100)
    assert book.set("c", 50)


def test_a_subject_moved_on_every_change_leaves_a_bounded_heap() -> None:
    """A group whose due time moves with every lease must not grow the heap without end."""
    book: DueTimes[str] = DueTimes()
    for at in range(100_000):
        book.set("busy", at)
    assert len(book._heap) <= 4 * len(book) + 64
    assert book.pop_due(10**9) == ["busy"]
