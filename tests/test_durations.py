"""Durations in reasons and messages read as people write them (brook.durations)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook.durations import DAY_MS, HOUR_MS, MINUTE_MS, words


@pytest.mark.parametrize(
    ("ms", "said"),
    [
        (0, "0 ms"),
        (-5, "0 ms"),
        (250, "250 ms"),
        (1000, "1 s"),
        (1500, "1.5 s"),
        (9999, "9.9 s"),
        (10_000, "10 s"),
        (59_999, "59 s"),
        (3 * MINUTE_MS, "3 min"),
        (3 * MINUTE_MS + 20_500, "3 min 20 s"),
        (HOUR_MS, "1 h"),
        (2 * HOUR_MS + 5 * MINUTE_MS, "2 h 5 min"),
        (DAY_MS, "1 day"),
        (5 * DAY_MS, "5 days"),
        (2 * DAY_MS + 4 * HOUR_MS + 59 * MINUTE_MS, "2 days 4 h"),
    ],
)
def test_durations_read_as_people_write_them(ms: int, said: str) -> None:
    assert words(ms) == said


@given(st.integers(0, 10**13))
def test_never_more_than_two_units_and_never_rounded_up(ms: int) -> None:
    said = words(ms).split()
    assert len(said) in (2, 4)
    if said[1] in ("day", "days"):
        assert int(said[0]) == ms // DAY_MS
    if said[1] == "h":
        assert int(said[0]) == ms // HOUR_MS
