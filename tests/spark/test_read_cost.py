"""What a read of a topic on S3 downloads: the topic once, and planning next to nothing.

A request-counting proxy sits between Spark (driver and tasks) and moto's S3
server, so every byte any process downloads is counted.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.log.view import TopicView
from brook.records import Record
from brook.storage.location import open_reader
from tests.s3proxy import FaultyProxy
from tests.s3server import MotoServer

pytestmark = pytest.mark.slow

PLANNING_SHARE_MAX = 0.01
QUERY_SHARE_MAX = 1.05


def topic_on_s3(moto: MotoServer, tmp_path: Path) -> tuple[str, int, int]:
    """A two-partition topic of sealed segments and active ones made of runs and
    chunks (many small syncs); returns its URL, record count and stored bytes."""
    url = moto.fresh_url()
    rng = random.Random(7)
    count = 0
    with brook.open(
        url,
        endpoint_url=moto.endpoint,
        cache_dir=str(tmp_path / "cache"),
        segment_bytes_max=3 * 1024 * 1024,
    ) as b:
        b.create_topic("events", partitions=2)
        for round_ in range(120):
            records = [Record(rng.randbytes(rng.randrange(50, 400))) for _ in range(150)]
            b.topic("events").append_many(records, partition=round_ % 2)
            count += len(records)
        storage: Any = b.storage
        stored = sum(
            storage.table(name, entry).size if entry.chunks is not None else entry.size
            for name, entry in storage.catalog().files.items()
            if name.endswith(".seg")
        )
    return url, count, stored


def test_a_full_read_downloads_the_topic_once_and_planning_almost_nothing(
    spark: Any, moto: MotoServer, tmp_path: Path
) -> None:
    url, count, stored = topic_on_s3(moto, tmp_path)
    proxy = FaultyProxy(int(moto.endpoint.rsplit(":", 1)[1]))
    try:
        view = TopicView(open_reader(url, {"endpoint_url": proxy.endpoint}), "events")
        bounds = view.bounds()
        slices = view.slices(
            {p: lo for p, (lo, _) in bounds.items()}, {p: hi for p, (_, hi) in bounds.items()}
        )
        view.storage.close()
        planning = proxy.answered_bytes["GET"]
        assert sum(hi for _, hi in bounds.values()) == count and len(slices) >= 2
        assert planning <= PLANNING_SHARE_MAX * stored, (planning, stored)

        proxy.answered_bytes.clear()
        df = (
            spark.read.format("brook")
            .option("url", url)
            .option("endpoint_url", proxy.endpoint)
            .option("topic", "events")
            .option("maxBytesPerTask", str(1024 * 1024))
            .load()
        )
        assert df.count() == count
        downloaded = proxy.answered_bytes["GET"]
        print(f"topic {stored} bytes; planning {planning}; a query downloads {downloaded}")
        assert downloaded <= QUERY_SHARE_MAX * stored, (downloaded, stored)
    finally:
        proxy.close()
