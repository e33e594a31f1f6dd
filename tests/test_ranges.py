"""Ranges hold a set of offsets as runs: the same answers as the set, in bounded space."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from brook.ranges import Ranges

OFFSETS = st.sets(st.integers(0, 300), max_size=80)
PAIRS = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300)), max_size=20)


def as_set(ranges: Ranges) -> set[int]:
    return {o for start, stop in ranges for o in range(start, stop)}


@given(OFFSETS, OFFSETS)
def test_ranges_answer_as_the_set_would(a: set[int], b: set[int]) -> None:
    ra, rb = Ranges.of(a), Ranges.of(b)
    assert as_set(ra) == a and len(ra) == len(a) and bool(ra) == bool(a)
    assert all((o in ra) == (o in a) for o in range(-1, 302))
    assert as_set(ra | rb) == a | b
    runs = list(ra)
    assert all(stop < nxt for (_, stop), (nxt, _) in pairwise(runs)), "disjoint and apart"


@given(PAIRS)
def test_pairs_are_merged_and_empty_ones_dropped(pairs: list[tuple[int, int]]) -> None:
    expected = {o for start, stop in pairs for o in range(start, stop)}
    assert as_set(Ranges(pairs)) == expected
    assert Ranges(pairs) == Ranges.of(expected)


def test_everything_from_an_offset_on_is_one_pair() -> None:
    rest = Ranges([(1_000, 50_000_000)])
    assert list(rest) == [(1_000, 50_000_000)] and len(rest) == 49_999_000
    assert 49_999_999 in rest and 999 not in rest and "1000" not in rest
