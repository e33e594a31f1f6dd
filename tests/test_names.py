"""Names Brook derives are always valid and bounded, and user patterns never take a
reserved name unless they name its namespace (SPEC §7, §11)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook import limits, names

name_text = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=limits.topic_name_chars_max)


@given(st.lists(name_text, min_size=1, max_size=3))
def test_a_derived_dead_letter_name_is_always_a_valid_topic_name(parts: list[str]) -> None:
    derived = names.dead_letters(*parts)
    assert names.NAME.fullmatch(derived)
    assert len(derived) <= limits.topic_name_chars_max
    assert names.is_dead_letters(derived)
    assert not derived.startswith(names.RESERVED_PREFIX) or parts[0].startswith("__")


@given(name_text, name_text, name_text)
def test_different_sources_never_share_a_derived_name(topic: str, a: str, b: str) -> None:
    if a != b:
        assert names.dead_letters(topic, a) != names.dead_letters(topic, b)


def test_short_names_are_the_ones_brook_always_derived() -> None:
    assert names.dead_letters("orders") == "orders.dlq"
    assert names.dead_letters("x.1", "a") == "x.1.a.dlq"


@given(st.text(alphabet="ab.*?", min_size=1, max_size=8), name_text)
def test_a_glob_takes_a_dead_letter_topic_only_when_it_names_dlq(pattern: str, base: str) -> None:
    topic = names.dead_letters(base)
    if names.pattern_matches(pattern, topic):
        assert pattern.endswith(".dlq")


def test_patterns_and_reserved_names() -> None:
    assert names.pattern_matches("x.*", "x.1")
    assert not names.pattern_matches("x.*", "x.1.dlq")
    assert not names.pattern_matches("*", "orders.dlq")
    assert names.pattern_matches("*.dlq", "orders.dlq")
    assert names.pattern_matches("orders.dlq", "orders.dlq"), "named explicitly"
    assert not names.pattern_matches("*", "__timers")
    assert names.pattern_matches("__*", "__timers")
