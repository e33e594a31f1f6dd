"""The join's decision, pure: a member counts once, by its index, whatever order or
number of times its finish is reported; the join fires once all are acked, fails at
the first dead one (unless failures are allowed), and never changes after."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook import join_headers
from brook.joins import model
from brook.joins.model import Arrival, Continuation, Member, Spec, Stored


def _stored(members: int, allow_failures: bool = False) -> Stored:
    spec = Spec(
        id="j",
        members=[Member(topic="t", group="g", partition=0, offset=i) for i in range(members)],
        then=Continuation(topic="out", group="g", value=b"cb"),
        on_error=Continuation(topic="errs", group="g", value=b"eb"),
        allow_failures=allow_failures,
    )
    return Stored(spec=spec, created_ms=0)


reports = st.lists(
    st.tuples(st.integers(0, 7), st.booleans(), st.binary(max_size=8)), min_size=0, max_size=40
)


@given(members=st.integers(1, 8), reported=reports, allow_failures=st.booleans())
def test_each_member_counts_once_and_the_verdict_never_changes(
    members: int, reported: list[tuple[int, bool, bytes]], allow_failures: bool
) -> None:
    stored = _stored(members, allow_failures)
    first: dict[int, Arrival] = {}
    verdicts = []
    for index, ok, data in reported:
        if index >= members:
            continue
        arrival = Arrival(ok, data, f"t/0/{index}")
        if stored.ended is None:
            first.setdefault(index, arrival)
        stored = model.arrive(stored, index, arrival)
        how = model.verdict(stored)
        if how is not None:
            verdicts.append(how)
            stored = model.ended(stored, how, 1)
    assert len(verdicts) <= 1, "a join ends once"
    assert stored.arrived == first, "the first report of each member is the one kept"
    failed = [i for i, a in first.items() if not a.ok]
    if verdicts == ["failed"]:
        assert failed and not allow_failures
        assert stored.failed_ref == f"t/0/{min(failed)}"
        assert stored.error == first[min(failed)].data.decode(errors="replace")
    elif verdicts == ["fired"]:
        assert len(first) == members and (allow_failures or not failed)
        made = model.continuation(stored)
        assert made is not None and made[0] == "out" and made[1].value == b"cb"
        headers = made[1].headers
        assert headers is not None and headers[join_headers.JOIN] == b"j"
        outcomes = join_headers.decode_results(headers[join_headers.RESULTS])
        assert outcomes == [(first[i].ok, first[i].data, first[i].ref) for i in range(members)]
    else:
        assert len(first) < members and (allow_failures or not failed)


def test_a_failed_join_appends_its_on_error_record_naming_the_member() -> None:
    stored = _stored(3)
    stored = model.arrive(stored, 1, Arrival(False, b"ValueError: no", "t/0/1"))
    assert model.verdict(stored) == "failed"
    stored = model.ended(stored, "failed", 9)
    made = model.error_record(stored)
    assert made is not None and made[0] == "errs"
    headers = made[1].headers
    assert headers is not None
    assert headers[join_headers.ERROR] == b"ValueError: no"
    assert headers[join_headers.FAILED] == b"t/0/1"
    assert model.append_key("j", error=True) != model.append_key("j")


def test_a_join_without_a_continuation_appends_nothing_when_it_fires() -> None:
    spec = Spec(id="w", members=[Member(topic="t", group="g", partition=0, offset=0)])
    stored = model.arrive(Stored(spec=spec, created_ms=0), 0, Arrival(True, b"1", "t/0/0"))
    assert model.verdict(stored) == "fired"
    assert model.continuation(stored) is None
