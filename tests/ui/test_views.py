"""The record browser's paging, in process: the key filter finds a key's records
anywhere in a partition a bounded scan at a time, and pages neither skip nor repeat
a record, whether records are small or big enough that a read returns a few."""

from __future__ import annotations

from pathlib import Path

import brook
from brook import limits
from brook.limits import read_bytes_max
from brook.partitioner import partition_for_key
from brook.server.ui import views


def walk(b: brook.Broker, topic: str, key: str = "") -> list[views.TopicPage]:
    """Every page from the newest, following the "older" link to the end."""
    pages = [views.topic(b, topic, key=key)]
    while pages[-1].older is not None:
        pages.append(views.topic(b, topic, before=pages[-1].older, key=key))
    return pages


def test_the_key_filter_finds_a_keys_records_anywhere_in_the_partition(tmp_path: Path) -> None:
    total = 3 * limits.dashboard_key_scan_records_max + 500
    needles = set(range(7, total, 997))
    with brook.open(tmp_path / "data") as b:
        b.topic("t").append_many(
            [
                brook.Record(b"%d" % i, key=b"needle" if i in needles else b"hay")
                for i in range(total)
            ]
        )
        pages = walk(b, "t", key="needle")
        found = [r.offset for page in pages for r in page.records]
        assert found == sorted(needles, reverse=True)
        assert all(r.key == "needle" for page in pages for r in page.records)
        # Each page looked through a bounded range, and the ranges tile the partition.
        ranges = [page.scanned for page in pages]
        assert ranges[0] == (total - limits.dashboard_key_scan_records_max, total)
        assert all(high - low <= limits.dashboard_key_scan_records_max for low, high in ranges)
        assert [high for _, high in ranges[1:]] == [low for low, _ in ranges[:-1]]
        assert ranges[-1][0] == 0
        assert pages[0].key_partition == partition_for_key(b"needle", 1) == 0


def test_a_common_key_pages_fifty_at_a_time_without_a_gap(tmp_path: Path) -> None:
    with brook.open(tmp_path / "data") as b:
        b.topic("t").append_many(
            [brook.Record(b"%d" % i, key=b"k%d" % (i % 3)) for i in range(1_000)]
        )
        pages = walk(b, "t", key="k1")
        found = [r.offset for page in pages for r in page.records]
        assert found == list(range(997, 0, -3))
        assert all(len(page.records) == limits.dashboard_records_per_page for page in pages[:-1])


def test_big_records_page_without_a_gap(tmp_path: Path) -> None:
    """A read stops at read_bytes_max; a page of records bigger than that over
    limits.dashboard_records_per_page still shows every one of them."""
    size = read_bytes_max // 10
    count = limits.dashboard_records_per_page + 10
    with brook.open(tmp_path / "data") as b:
        for i in range(count):
            b.topic("t").append(bytes([65 + i % 26]) * size)
        pages = walk(b, "t")
        assert [r.offset for page in pages for r in page.records] == list(range(count - 1, -1, -1))
        assert all(r.size == size and r.cut for page in pages for r in page.records)


def test_a_key_on_another_partition_is_pointed_to(tmp_path: Path) -> None:
    with brook.open(tmp_path / "data") as b:
        b.create_topic("t", partitions=4)
        b.topic("t").append(b"v", key=b"where")
        home = partition_for_key(b"where", 4)
        elsewhere = views.topic(b, "t", partition=(home + 1) % 4, key="where")
        assert elsewhere.records == [] and elsewhere.key_partition == home
        at_home = views.topic(b, "t", partition=home, key="where")
        assert [r.value for r in at_home.records] == ["v"]
