"""The storage layout lives in one module, and docs/FORMAT.md lists every name in it."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from brook import layout

FORMAT = (Path(__file__).parents[1] / "docs" / "FORMAT.md").read_text()
NAMES = st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True)


def test_every_pattern_is_documented_in_format() -> None:
    for pattern in layout.PATTERNS:
        assert re.search(rf"^{re.escape(pattern)}\s", FORMAT, re.M), f"{pattern} not in FORMAT.md"


def test_the_documented_patterns_are_the_names_made() -> None:
    made = [
        (layout.FORMAT, "format.json"),
        (layout.wal_file(4096), "wal/<start>.wal"),
        (layout.WAL_CHECKPOINT, "wal/checkpoint.json"),
        (layout.topic_config("t"), "topics/<topic>/topic.json"),
        (
            layout.segment(layout.partition_prefix("t", 3), 7),
            "topics/<topic>/<partition>/<base>.seg",
        ),
        (
            layout.durable_mark(layout.partition_prefix("t", 3)),
            "topics/<topic>/<partition>/durable.mark",
        ),
        (layout.group_positions("t", "g"), "groups/<topic>/<group>.json"),
        (layout.queue_settings("t", "g"), "queues/<topic>/<group>.json"),
        (
            layout.segment(layout.partition_prefix(layout.queue_status_log("t", "g"), 0), 0),
            "topics/__queues/<topic>/<group>/0/<base>.seg",
        ),
        (
            layout.segment(layout.partition_prefix(layout.TIMER_LOG, 0), 0),
            "topics/__timers/0/<base>.seg",
        ),
        (layout.timer_run(3_600_000, 2), "timers/buckets/<bucket>/<flush>.run"),
        (layout.TIMER_CHECKPOINT, "timers/checkpoint.json"),
        (layout.staging_state("t", "w"), "staging/<topic>/<writer>/state.json"),
        (
            layout.staging_chunk("t", "w", 4, "p", 1),
            "staging/<topic>/<writer>/<seq>/<part>/<chunk>",
        ),
        (layout.endpoint("hook"), "endpoints/<endpoint>.json"),
        (layout.schedule("nightly"), "schedules/<schedule>.json"),
        (layout.join("j1"), "joins/defs/<join>.json"),
        (
            layout.segment(layout.partition_prefix(layout.JOIN_LOG, 0), 0),
            "topics/__joins/0/<base>.seg",
        ),
        (layout.JOIN_CHECKPOINT, "joins/checkpoint.json"),
        (layout.lake_manifest("t"), "lake/topics/<topic>/manifest.json"),
        (layout.lake_note("t"), "lake/topics/<topic>/_READ_THE_MANIFEST.txt"),
        (
            layout.lake_file_in(layout.lake_topic("t"), 2, 0, 100, "0a1b2c3d"),
            "lake/topics/<topic>/<partition>/<first>-<next>-<tag>.parquet",
        ),
        (
            layout.lake_manifest_in(layout.lake_history("t", "g")),
            "lake/queues/<topic>/<group>/manifest.json",
        ),
        (
            layout.lake_file_in(layout.lake_history("t", "g"), 0, 0, 100, "0a1b2c3d"),
            "lake/queues/<topic>/<group>/0/<first>-<next>-<tag>.parquet",
        ),
    ]
    assert sorted(p for _, p in made) == sorted(set(layout.PATTERNS) - {layout.LOCK})
    for name, pattern in made:
        shape = re.sub(
            r"<[a-z]+>", "[^/]+", re.escape(pattern).replace(r"\<", "<").replace(r"\>", ">")
        )
        assert re.fullmatch(shape, name), (name, pattern)


def test_the_prefixes_of_a_topic_hold_its_names() -> None:
    assert layout.topic_config("t").startswith(layout.topic_prefix("t"))
    assert layout.group_positions("t", "g").startswith(layout.groups_of("t"))
    assert layout.queue_settings("t", "g").startswith(layout.queues_of("t"))
    status = layout.partition_prefix(layout.queue_status_log("t", "g"), 0)
    assert status.startswith(layout.queue_status_logs_of("t"))
    assert not status.startswith(layout.queue_status_logs_of("t2"))
    assert layout.staging_chunk("t", "w", 1, "p", 0).startswith(layout.staging_of("t"))
    assert layout.lake_history("t", "g").startswith(layout.lake_histories_of("t"))
    assert not layout.lake_history("t2", "g").startswith(layout.lake_histories_of("t"))


@given(NAMES, NAMES, st.integers(0, 10**12), st.integers(0, 10**9))
def test_names_parse_back(topic: str, group: str, bucket: int, flush: int) -> None:
    assert layout.parse_queue_settings(layout.queue_settings(topic, group)) == (topic, group)
    assert layout.parse_timer_run(layout.timer_run(bucket, flush)) == (bucket, flush)
    assert layout.parse_queue_settings(layout.topic_config(topic)) is None
    assert layout.parse_timer_run(layout.TIMER_CHECKPOINT) is None
