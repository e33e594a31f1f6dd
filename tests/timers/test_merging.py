"""A bucket's runs, merged as the service merges them, say what the runs said."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brook.models import TimerInfo
from brook.timers import files, merging
from brook.timers.model import Timer

MOST = 8
HISTORY_MS = 1_000


def restored(runs: list[bytes], since_ms: int) -> tuple[set[str], dict[str, TimerInfo]]:
    """What a restart takes from a bucket's runs (TimerBook.restore): the timers
    with no end are pending; the ends since `since_ms` are remembered."""
    timers: list[Timer] = []
    ended: list[TimerInfo] = []
    for data in runs:
        run = files.decode_run(data)
        timers.extend(run.timers)
        ended.extend(run.ended)
    gone = {info.timer_id for info in ended}
    pending = {t.id for t in timers if t.id not in gone}
    return pending, {info.timer_id: info for info in ended if (info.at_ms or 0) >= since_ms}


class Bucket:
    """A bucket's run files as the service keeps them, next to every run unmerged."""

    def __init__(self) -> None:
        self.runs: list[bytes] = []
        self.unmerged: list[bytes] = []
        self.rewritten = 0

    def flush(self, run: bytes, now_ms: int) -> None:
        self.unmerged.append(run)
        count = merging.runs_to_merge([len(r) for r in self.runs], len(run), MOST)
        if count:
            older = self.runs[-count:]
            whole = count == len(self.runs)
            run = merging.merge([*older, run], whole, now_ms - HISTORY_MS)
            merged = files.decode_run(run)
            ended = {info.timer_id for info in merged.ended}
            assert not [t for t in merged.timers if t.id in ended], "ended timers are dropped"
            self.rewritten += len(run)
            del self.runs[-count:]
        self.runs.append(run)
        assert len(self.runs) < MOST


def timer(number: int) -> Timer:
    key = None if number % 3 else b"k"
    headers = {"h": b"v"} if number % 5 == 0 else None
    return Timer(f"t{number}", "topic", 1_000 + number, b"value %d" % number, key, headers)


def end(t: Timer, now_ms: int, fired: bool) -> TimerInfo:
    if fired:
        return TimerInfo(t.id, "fired", t.topic, t.due_ms, 0, 7, now_ms)
    return TimerInfo(t.id, "cancelled", t.topic, t.due_ms, at_ms=now_ms)


flushes = st.lists(
    st.tuples(
        st.integers(0, 12),  # timers scheduled
        # pending ones that end, often the oldest (whose run is likely left out of a merge)
        st.lists(st.one_of(st.just(0), st.integers(0, 10_000)), max_size=10),
        st.booleans(),  # fired, or cancelled
        st.integers(0, 1_500),  # ms passing before the flush
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(flushes)
def test_merged_runs_restore_what_every_run_would(steps: list) -> None:  # type: ignore[type-arg]
    bucket = Bucket()
    pending: list[Timer] = []
    made = 0
    now = 0
    for scheduled, picks, fired, passing in steps:
        new = [timer(made + i) for i in range(scheduled)]
        made += scheduled
        pending.extend(new)
        ended = []
        for pick in picks:
            if pending:
                ended.append(end(pending.pop(pick % len(pending)), now, fired))
        now += passing
        bucket.flush(files.encode(files.Run(new, ended)), now)
        since = now - HISTORY_MS
        assert restored(bucket.runs, since) == restored(bucket.unmerged, since)
        assert restored(bucket.runs, since)[0] == {t.id for t in pending}


def test_a_run_merged_whole_keeps_no_ended_timer_and_no_old_end() -> None:
    a, b, c = timer(1), timer(2), timer(3)
    old = files.encode(files.Run([a, b, c], [end(a, 0, True)]))
    new = files.encode(files.Run([], [end(b, 5_000, False)]))
    merged = files.decode_run(merging.merge([old, new], True, 4_000))
    assert merged == files.Run([c], [end(b, 5_000, False)])
    partial = files.decode_run(merging.merge([old, new], False, 4_000))
    assert partial == files.Run([c], [end(a, 0, True), end(b, 5_000, False)])


def test_an_end_whose_timer_is_in_an_older_run_is_kept_by_a_partial_merge() -> None:
    a = timer(1)
    bucket = Bucket()
    bucket.flush(files.encode(files.Run([a], [])), 0)
    bucket.flush(files.encode(files.Run([timer(2)] * 40, [])), 0)  # big: not merged again
    for i in range(MOST):
        ended = [end(a, 0, True)] if i == 0 else []
        bucket.flush(files.encode(files.Run([timer(10 + i)], ended)), 10 * HISTORY_MS)
    assert len(files.decode_run(bucket.runs[0]).timers) == 1, "the oldest run was left alone"
    assert a.id not in restored(bucket.runs, 0)[0], "the fired timer stays fired"


def test_a_timers_bytes_are_rewritten_a_logarithmic_number_of_times() -> None:
    """Merging every run each time rewrote the bucket every MOST flushes: here
    1,000 flushes of one timer each wrote the bucket 71 times over; tiered merges 5 times."""
    bucket = Bucket()
    run = files.encode(files.Run([timer(0)], []))
    for _ in range(1_000):
        bucket.flush(run, 0)
    assert sum(len(files.decode_run(r).timers) for r in bucket.runs) == 1_000
    total = sum(len(r) for r in bucket.runs)
    assert bucket.rewritten <= 8 * total, bucket.rewritten / total


@given(st.lists(st.integers(1, 10_000), max_size=MOST - 1), st.integers(1, 10_000))
def test_a_merge_takes_the_newest_runs_and_keeps_the_count_below_most(
    older: list[int], new: int
) -> None:
    count = merging.runs_to_merge(older, new, MOST)
    if len(older) + 1 < MOST:
        assert count == 0
    else:
        assert 1 <= count <= len(older)
        assert len(older) - count + 1 < MOST
