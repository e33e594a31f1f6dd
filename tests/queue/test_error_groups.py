"""error_group: the key dead records are grouped by. Examples of the rule, then its
properties under hypothesis: total, bounded, stable, and blind to ids."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from brook import limits
from brook.queue.error_groups import error_group

TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/jobs.py", line 7, in run
    charge(order)
  File "/srv/app/orders.py", line 12, in charge
    raise KeyError(order)
KeyError: 'order-77'
"""


@pytest.mark.parametrize(
    ("reason", "group"),
    [
        # A task's error summary: the exception and the innermost frame, no message.
        (
            "ValueError: no customer 7\n  /srv/jobs.py:3 in run\n  /srv/orders.py:12 in charge",
            "ValueError at orders.py:12 in charge",
        ),
        (
            "KeyError: 'x'\n  C:\\app\\orders.py:9 in <lambda>",
            "KeyError at orders.py:9 in <lambda>",
        ),
        ("ValueError: \n  /srv/orders.py:12 in charge", "ValueError at orders.py:12 in charge"),
        (TRACEBACK, "KeyError at orders.py:12 in charge"),
        # Free text: the first line, what varies masked.
        ("no customer 123", "no customer N"),
        ("order 5 was cancelled\nmore detail 9", "order N was cancelled"),
        ("job 5f3a2b1c9d0e failed", "job N failed"),
        ("user 123e4567-e89b-12d3-a456-426614174000 is gone", "user N is gone"),
        ("<Order object at 0x7f3a2b1c> broke", "<Order object at N> broke"),
        ("no such user 'bob'", "no such user '…'"),
        ("can't find the user's order", "can't find the user's order"),
        ("timeout: read timed out after 10000 ms", "timeout: read timed out after N ms"),
        ("lease expired on the last attempt (5)", "lease expired on the last attempt (N)"),
        ("expired: older than expire_after_ms", "expired: older than expire_after_ms"),
        ("sha256 mismatch for cus_123", "sha256 mismatch for cus_N"),
        # Codes an operator acts on are kept.
        ("HTTP 500", "HTTP 500"),
        ("503", "503"),
        ("404: refused", "404: refused"),
        ("429 (Retry-After 30)", "429 (Retry-After N)"),
        ("status_code=502 from upstream", "status_code=502 from upstream"),
        ("[Errno 111] Connection refused", "[Errno 111] Connection refused"),
        ("worker exited with exit code 137", "worker exited with exit code 137"),
        ("failed at orders.py:12", "failed at orders.py:12"),
        ("", ""),
        ("\n\n", ""),
    ],
)
def test_the_rule_by_example(reason: str, group: str) -> None:
    assert error_group(reason) == group


def test_statuses_stay_apart_ids_do_not() -> None:
    assert error_group("HTTP 500") != error_group("HTTP 503")
    assert error_group("500") != error_group("503")
    assert error_group("no customer 123") == error_group("no customer 456789")


# ------------------------------------------------------------ properties

TOKENS = st.sampled_from(
    [" ", "'", '"', ":", "=", "-", "_", ".", "0x", "HTTP", "status", "code", "Errno", ".py:",
     "a", "f", "z", "N", "…", "Error", "\t", "12", "503", "deadbeef", "7f3a2b1c9"]
)  # fmt: skip
shaped = st.lists(TOKENS | st.text(max_size=6), max_size=400).map("".join)
"""Text made of the pieces the rule looks at, long enough to be cut."""


@given(st.text() | shaped)
@example("a" * 10_000)
@example("'" + "x" * 300 + "'")
@example("Traceback (most recent call last):\n")
@example("E: m\n  :1 in ")
def test_any_text_groups_within_the_bound(reason: str) -> None:
    group = error_group(reason)
    assert len(group) <= limits.error_group_chars_max
    assert "\n" not in group


@given(st.text().map(lambda s: s.replace("\n", " ")) | shaped.map(lambda s: s.replace("\n", " ")))
@example("HTTP 5034")
@example("x" * 199 + "'ab'c")
@example("x" * 195 + " abcdef12g")
def test_a_free_text_group_groups_as_itself(reason: str) -> None:
    group = error_group(reason)
    assert error_group(group) == group


words = st.sampled_from(["no", "customer", "order", "for", "failed", "missing", "the", "card"])
numbers = st.integers(0, 10**12).map(str)
hex_ids = st.binary(min_size=4, max_size=16).map(bytes.hex)
quoted = st.text(st.characters(blacklist_characters="'\n"), min_size=1, max_size=200)
slots = st.one_of(
    st.tuples(numbers, numbers),
    st.tuples(st.uuids(), st.uuids()).map(lambda pair: (str(pair[0]), str(pair[1]))),
    st.tuples(hex_ids, hex_ids).filter(lambda pair: all(any(c.isdigit() for c in h) for h in pair)),
    st.tuples(quoted, quoted).map(lambda pair: (f"'{pair[0]}'", f"'{pair[1]}'")),
)
"""Two values of one kind for one place in a reason: two ids, two quoted strings."""


@given(st.lists(words, min_size=1, max_size=6), st.lists(slots, max_size=4))
def test_reasons_that_differ_only_in_ids_are_one_group(
    lead: list[str], values: list[tuple[str, str]]
) -> None:
    first = " ".join([*lead, *(a for a, _ in values)])
    second = " ".join([*lead, *(b for _, b in values)])
    assert error_group(first) == error_group(second)


messages = st.text(max_size=300)
frame_lines = st.lists(
    st.tuples(
        st.sampled_from(["/srv/a.py", "/x/y/jobs.py", "C:\\app\\b.py"]), st.integers(1, 9999)
    ),
    max_size=4,
)


@given(messages, messages, frame_lines, frame_lines)
def test_a_summary_groups_by_its_type_and_innermost_frame_whatever_the_message(
    message: str, other: str, outer: list[tuple[str, int]], other_outer: list[tuple[str, int]]
) -> None:
    def summary(text: str, frames: list[tuple[str, int]]) -> str:
        lines = [f"  {file}:{line} in f" for file, line in frames]
        return "\n".join([f"ValueError: {text}", *lines, "  /srv/app/orders.py:12 in charge"])

    group = error_group(summary(message, outer))
    assert group == "ValueError at orders.py:12 in charge"
    assert error_group(summary(other, other_outer)) == group
