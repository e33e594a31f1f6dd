"""The write-ahead log on object storage (`write_ahead_log=True`, issue 49): a commit round
is one PUT however many partitions it touched, and everything else holds as without it:
a fresh machine, a take-over and a reader beside the owner see every acknowledged record,
and a broker fenced by a take-over never sees a PUT of its WAL succeed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import brook
from brook.broker import Broker
from brook.errors import Fenced
from brook.storage.s3 import S3Storage
from tests.s3server import MotoServer
from tests.storage.test_s3 import abandon, opened, values

TOPICS = 40


def logged(moto: MotoServer, url: str, cache: Path, **options: object) -> Broker:
    return opened(moto, url, cache, write_ahead_log=True, **options)


def puts(b: Broker) -> int:
    storage = b.storage
    assert isinstance(storage, S3Storage)
    return storage.bucket.counts.requests["put"]


def append_to_every_topic_at_once(b: Broker, tag: bytes) -> None:
    """One record to each topic from as many threads, released together (rounds of many)."""
    gate = threading.Barrier(TOPICS)

    def write(n: int) -> None:
        gate.wait()
        b.topic(f"tenant{n:03d}").append(tag + b"%d" % n)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(TOPICS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_a_round_over_many_topics_is_one_put(moto: MotoServer, tmp_path: Path) -> None:
    url = moto.fresh_url()
    with logged(moto, url, tmp_path / "c", checkpoint_interval_ms=600_000) as b:
        for n in range(TOPICS):
            b.topic(f"tenant{n:03d}").append(b"made")
        b.core.checkpoint()
        before, rounds = puts(b), b.commit_stats().rounds
        append_to_every_topic_at_once(b, b"v")
        made = puts(b) - before
        rounds = b.commit_stats().rounds - rounds
        assert made == rounds, f"{made} PUTs for {rounds} rounds of {TOPICS} partitions"
        assert rounds < TOPICS / 2, f"{rounds} rounds: the appends were not gathered"
        # The owner reads what only its WAL holds stored so far.
        assert values(b, "tenant007") == [b"made", b"v7"]


def test_a_fresh_machine_and_a_reader_see_what_only_the_wal_holds(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    first = logged(moto, url, tmp_path / "first", checkpoint_interval_ms=600_000)
    for n in range(TOPICS):
        first.topic(f"tenant{n:03d}").append(b"made")
    first.core.checkpoint()
    append_to_every_topic_at_once(first, b"after the checkpoint ")
    with opened(moto, url, tmp_path / "reader", read_only=True) as reader:
        assert values(reader, "tenant032") == [b"made", b"after the checkpoint 32"]
    abandon_without_checkpoint(first)
    with logged(moto, url, tmp_path / "second", take_over=True) as second:  # its owner is dead
        for n in range(TOPICS):
            assert values(second, f"tenant{n:03d}") == [b"made", b"after the checkpoint %d" % n]


def abandon_without_checkpoint(b: Broker) -> None:
    """A machine that dies: its threads stop, nothing more reaches the bucket."""
    storage = b.storage
    assert isinstance(storage, S3Storage)
    storage.fenced.set()  # every later write of it fails, as if the network were gone
    abandon(b)


def test_a_take_over_replays_the_old_owners_wal_and_fences_it(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    old = logged(moto, url, tmp_path / "old", checkpoint_interval_ms=600_000)
    old.topic("t").append(b"before")
    old.core.checkpoint()
    old.topic("t").append(b"in the old owner's WAL only")
    new = logged(moto, url, tmp_path / "new", take_over=True)
    with pytest.raises(Fenced):
        old.topic("t").append(b"after the take-over")
    new.topic("t").append(b"new owner")
    assert values(new, "t") == [b"before", b"in the old owner's WAL only", b"new owner"]
    abandon(old)
    new.close()
    # A broker without the WAL opening the prefix replays it, then goes on without one.
    with opened(moto, url, tmp_path / "third") as third:
        assert values(third, "t") == [b"before", b"in the old owner's WAL only", b"new owner"]
        assert not third.storage.list("wal/")
        third.topic("t").append(b"third")
    with brook.open(url, endpoint_url=moto.endpoint, read_only=True) as reader:
        assert values(reader, "t")[-1] == b"third"
