"""The S3 backend on moto's server: the bucket is the database, and one writer owns it."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import brook
from brook import limits
from brook.broker import Broker
from brook.errors import BrookError, Fenced, StorageError
from brook.records import Record
from brook.storage.s3 import S3Storage
from brook.storage.s3.merge import RUNS_JOINED_MIN, join_next_runs, merge_next_run
from brook.storage.s3.objects import Bucket
from tests import waiting
from tests.s3server import MotoServer
from tests.served import SRC


def opened(moto: MotoServer, url: str, cache: Path, **options: Any) -> Broker:
    return brook.open(url, endpoint_url=moto.endpoint, cache_dir=str(cache), **options)


def values(b: Broker, topic: str, partition: int = 0) -> list[bytes]:
    return [r.value for r in b.topic(topic).read(partition, 0, 10_000)]


def abandon(b: Broker) -> None:
    """Stop a broker's threads the way a dead machine would not: without a word to the bucket."""
    with contextlib.suppress(BrookError):
        b.close()


def test_a_fresh_machine_serves_every_acknowledged_record_and_position(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    first = opened(moto, url, tmp_path / "cache")
    first.create_topic("orders", partitions=2)
    orders = first.topic("orders")
    acks = orders.append_many([Record(b"v%d" % i, key=b"k%d" % i) for i in range(50)])
    acks.append(orders.append(b"single", key=b"k1", headers={"h": b"1"}))
    consumer = first.consumer("orders", "billing")
    consumer.poll(max_records=20, timeout=0)
    consumer.commit()
    committed = consumer.committed()
    ends = orders.end_offsets()
    shutil.rmtree(tmp_path / "cache")  # the machine and its disk are gone

    # The dead machine's lease is still live: an operator who knows takes the prefix over.
    second = opened(moto, url, tmp_path / "new-cache", take_over=True)
    assert second.topic("orders").end_offsets() == ends
    for ack in acks:
        record = second.topic("orders").read(ack.partition, ack.offset, 1)[0]
        assert (record.offset, record.timestamp) == (ack.offset, ack.timestamp)
    assert second.topic("orders").read(acks[-1].partition, acks[-1].offset, 1)[0].headers == {
        "h": b"1"
    }
    assert second.consumer("orders", "billing").committed() == committed
    abandon(first)
    second.close()


def test_the_newer_broker_fences_the_older_and_nothing_it_writes_is_seen(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    old = opened(moto, url, tmp_path / "old")
    old.topic("t").append(b"before")
    new = opened(moto, url, tmp_path / "new", take_over=True)
    with pytest.raises(Fenced):
        old.topic("t").append(b"after the takeover")
    with pytest.raises(Fenced):
        old.create_topic("other")
    new.topic("t").append(b"new owner")
    assert values(new, "t") == [b"before", b"new owner"]
    abandon(old)
    new.close()
    third = opened(moto, url, tmp_path / "third")
    assert values(third, "t") == [b"before", b"new owner"]
    assert [t.name for t in third.topics()] == ["t"]
    third.close()


class Wrapped:
    """A bucket passed through, for wrappers that change one or two of its calls."""

    def __init__(self, inner: Bucket) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class LandsThenFails(Wrapped):
    """A bucket whose next write is stored but answered with an error (a lost response)."""

    def __init__(self, inner: Bucket, method: str) -> None:
        super().__init__(inner)
        self._method = method
        self.armed = True

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name != self._method:
            return method

        def landed_then_failed(*args: Any) -> Any:
            result = method(*args)
            if self.armed:
                self.armed = False
                raise StorageError("S3 write failed: connection reset")
            return result

        return landed_then_failed


def test_a_chunk_stored_without_an_answer_is_never_served(moto: MotoServer, tmp_path: Path) -> None:
    url = moto.fresh_url()
    storage = S3Storage(url, endpoint_url=moto.endpoint, cache_dir=tmp_path / "c")
    with Broker(storage) as b:
        t = b.topic("t")
        t.append(b"one")
        real = storage.bucket
        storage.bucket = LandsThenFails(real, "create")  # type: ignore[assignment]
        with pytest.raises(StorageError):
            t.append(b"told it failed")
        t.append(b"two")
        assert values(b, "t") == [b"one", b"two"]
    with opened(moto, url, tmp_path / "other") as again:
        assert values(again, "t") == [b"one", b"two"]


def test_a_catalog_change_stored_without_an_answer_goes_on(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    storage = S3Storage(url, endpoint_url=moto.endpoint)
    with Broker(storage) as b:
        storage.bucket = LandsThenFails(storage.bucket, "replace")  # type: ignore[assignment]
        b.create_topic("made", partitions=2)
        b.topic("made").append(b"x", key=b"k")
    with opened(moto, url, tmp_path / "other") as again:
        assert [(t.name, t.partitions) for t in again.topics()] == [("made", 2)]


def test_reads_come_from_the_cache_which_stays_within_its_bound(
    moto: MotoServer, tmp_path: Path
) -> None:
    bound = 64 * 1024
    with opened(moto, moto.fresh_url(), tmp_path / "c", cache_bytes=bound) as b:
        storage = b.storage
        assert isinstance(storage, S3Storage) and storage.cache is not None
        t = b.topic("t")
        for i in range(200):
            t.append(b"%04d" % i + b"x" * 1000)
        gets = storage.bucket.counts.requests["get"]
        recent = t.read(0, 190, 10)
        assert [r.value[:4] for r in recent] == [b"%04d" % i for i in range(190, 200)]
        assert storage.bucket.counts.requests["get"] == gets, "recent data is read from the cache"
        assert len(t.read(0, 0, 10_000)) == 200, "evicted data is fetched again"
        assert storage.cache.size_bytes <= bound


def test_serve_on_s3_reports_what_the_bucket_bills_for(moto: MotoServer, tmp_path: Path) -> None:
    from tests.served import Served

    url = moto.fresh_url()
    server = Served(
        tmp_path / "unused",
        "--storage",
        url,
        "--endpoint-url",
        moto.endpoint,
        "--cache-dir",
        str(tmp_path / "cache"),
        measured=True,
    )
    try:
        for i in range(3):
            status, _ = server.request("POST", "/v1/topics/t/records", b"record %d" % i)
            assert status == 200
        status, got = server.request("GET", "/v1/topics/t/records?offset=0")
        assert [r["value"] for r in got["records"]] == ["record 0", "record 1", "record 2"]
        status, text = server.request("GET", "/metrics")
        metrics = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line and not line.startswith("#")
        }
        assert metrics['brook_object_requests_total{kind="put"}'] >= 3, (
            "a PUT per acknowledged sync"
        )
        assert metrics["brook_object_bytes_sent_total"] > 0
        assert 'brook_cache_reads_total{result="hit"}' in metrics
        assert server.stop() == 0
    finally:
        server.close()
    assert not (tmp_path / "unused").exists(), "--storage keeps nothing in --data"
    with opened(moto, url, tmp_path / "other") as again:
        assert values(again, "t") == [b"record 0", b"record 1", b"record 2"]


class Gated(Wrapped):
    """A bucket whose creates wait at a gate: a PUT held in flight."""

    def __init__(self, inner: Bucket) -> None:
        super().__init__(inner)
        self.entered = threading.Event()
        self.gate = threading.Event()

    def create(self, key: str, data: bytes) -> str:
        self.entered.set()
        self.gate.wait(timeout=30)
        return self.inner.create(key, data)


def test_bytes_in_flight_count_and_a_cut_cancels_them(moto: MotoServer, tmp_path: Path) -> None:
    storage = S3Storage(moto.fresh_url(), endpoint_url=moto.endpoint)
    storage.lock()
    file = storage.create_appendable("seg/a", b"head")
    gated = Gated(storage.bucket)
    storage.bucket = gated  # type: ignore[assignment]
    file.append([b"first"])
    outcome: list[BaseException | None] = []

    def sync() -> None:
        try:
            file.sync()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    syncing = threading.Thread(target=sync)
    syncing.start()
    gated.entered.wait(timeout=30)
    file.append([b"second"])
    assert file.size() == len(b"headfirstsecond"), "bytes in flight are part of the size"
    file.truncate(4)  # a failure cuts the file back to what is durable
    gated.gate.set()
    syncing.join(timeout=30)
    assert isinstance(outcome[0], StorageError), "a cancelled sync is not a durable one"
    assert file.size() == 4
    file.append([b"again"])
    file.sync()
    reader = storage.open_read("seg/a")
    assert reader.read(0, 100) == b"headagain", "the cancelled chunk never shows"
    storage.bucket = gated.inner  # type: ignore[assignment]
    storage.close()
    again = S3Storage(storage.bucket.url, endpoint_url=moto.endpoint)
    again.lock()
    assert again.read_all("seg/a") == b"headagain"
    again.close()


def wait_for(condition: Any, seconds: float = 30) -> None:
    waiting.wait_for(condition, seconds, every_s=0.02)


def test_small_chunks_are_merged_and_a_restart_reads_few_objects(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    with opened(moto, url, tmp_path / "c") as b:
        t = b.topic("t")
        for i in range(100):
            t.append(b"record %d" % i)  # one chunk each
        storage = b.storage
        assert isinstance(storage, S3Storage)
        name = b.core.topic_state("t").logs[0].segments[-1].name

        def merged() -> int:
            return storage.catalog().files[name].merged_chunks

        wait_for(lambda: merged() >= 64)
        assert values(b, "t") == [b"record %d" % i for i in range(100)]
    fresh = S3Storage(url, endpoint_url=moto.endpoint)
    with Broker(fresh) as again:
        gets = fresh.bucket.counts.requests["get"]
        assert values(again, "t") == [b"record %d" % i for i in range(100)]
        assert fresh.bucket.counts.requests["get"] - gets <= 40, "runs, not 100 chunks"


def test_runs_are_joined_so_many_syncs_leave_few_objects(moto: MotoServer, tmp_path: Path) -> None:
    """600 syncs of one record: 18 runs of 32 chunks, joined four of one size at a time
    into a few runs, which a broker on an empty disk reads with a few GETs."""
    url = moto.fresh_url()
    expected = [b"record %04d" % i for i in range(600)]
    with opened(moto, url, tmp_path / "c") as b:
        t = b.topic("t")
        for value in expected:
            t.append(value)
        storage = b.storage
        assert isinstance(storage, S3Storage)
        name = b.core.topic_state("t").logs[0].segments[-1].name

        def settled() -> bool:
            entry = storage.catalog().files[name]
            return entry.merged_chunks >= 550 and len(entry.runs) <= 6

        wait_for(settled)
        sizes = [run.size for run in storage.catalog().files[name].runs]
        assert sizes == sorted(sizes, reverse=True), "older runs are the bigger ones"
        assert values(b, "t") == expected
    fresh = S3Storage(url, endpoint_url=moto.endpoint, cache_dir=tmp_path / "empty")
    with Broker(fresh) as again:
        assert values(again, "t") == expected
        assert sum(fresh.bucket.counts.requests.values()) <= 50


@pytest.mark.parametrize("dies_after", ["create", "replace", "delete_many"])
def test_a_join_of_runs_stopped_at_any_step_loses_nothing(
    moto: MotoServer, tmp_path: Path, dies_after: str
) -> None:
    url = moto.fresh_url()
    storage = S3Storage(url, endpoint_url=moto.endpoint)
    storage.merger.close()  # merge and join by hand, to stop where the test says
    written = []
    with Broker(storage) as b:
        t = b.topic("t")
        name = ""
        for run in range(RUNS_JOINED_MIN):  # runs of 32 chunks each, of one size
            for _ in range(34 if run == 0 else 32):  # merging leaves the newest 2 alone
                written.append(b"r%04d" % len(written))
                t.append(written[-1])
            name = b.core.topic_state("t").logs[0].segments[-1].name
            assert merge_next_run(storage, name)
        assert len(storage.catalog().files[name].runs) == RUNS_JOINED_MIN
        storage.bucket = LandsThenFails(storage.bucket, dies_after)  # type: ignore[assignment]
        with contextlib.suppress(StorageError):
            join_next_runs(storage, name)
        storage.bucket = storage.bucket.inner  # type: ignore[attr-defined]
        assert values(b, "t") == written
    with opened(moto, url, tmp_path / "other") as again:
        assert values(again, "t") == written
        again.topic("t").append(b"more")
        assert values(again, "t")[-1] == b"more"


@pytest.mark.parametrize("dies_after", ["create", "replace", "delete"])
def test_a_merge_stopped_at_any_step_loses_nothing(
    moto: MotoServer, tmp_path: Path, dies_after: str
) -> None:
    url = moto.fresh_url()
    storage = S3Storage(url, endpoint_url=moto.endpoint)
    storage.merger.close()  # merge by hand, to stop it where the test says
    with Broker(storage) as b:
        t = b.topic("t")
        for i in range(40):
            t.append(b"r%d" % i)
        name = b.core.topic_state("t").logs[0].segments[-1].name
        storage.bucket = LandsThenFails(storage.bucket, dies_after)  # type: ignore[assignment]
        with contextlib.suppress(StorageError):
            merge_next_run(storage, name)
        storage.bucket = storage.bucket.inner  # type: ignore[attr-defined]
    with opened(moto, url, tmp_path / "other") as again:
        assert values(again, "t") == [b"r%d" % i for i in range(40)]
        again.topic("t").append(b"more")
        assert values(again, "t")[-1] == b"more"


class LandsThenGoesDark(Wrapped):
    """A manifest write lands but its answer is lost, and the read that would tell is lost too."""

    def __init__(self, inner: Bucket) -> None:
        super().__init__(inner)
        self.armed = True

    def replace(self, key: str, data: bytes, etag: str) -> str:
        result = self.inner.replace(key, data, etag)
        if self.armed:
            raise StorageError("S3 replace failed: connection reset")
        return result

    def get(self, key: str) -> Any:
        if self.armed:
            self.armed = False
            raise StorageError("S3 read failed: connection reset")
        return self.inner.get(key)


def test_a_catalog_change_whose_outcome_was_never_learned_is_adopted_not_fenced(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    storage = S3Storage(url, endpoint_url=moto.endpoint)
    with Broker(storage) as b:
        storage.bucket = LandsThenGoesDark(storage.bucket)  # type: ignore[assignment]
        with pytest.raises(StorageError):
            b.create_topic("unsure")
        b.create_topic("sure")  # the first change did land: not another broker's doing
        b.topic("sure").append(b"x")
    with opened(moto, url, tmp_path / "other") as again:
        # "unsure" failed before its settings were written, so it is no topic.
        assert {t.name for t in again.topics()} == {"sure"}
        assert values(again, "sure") == [b"x"]


class AnswersLate(Wrapped):
    """A bucket whose next create gets no answer, and lands later, when the test says."""

    def __init__(self, inner: Bucket) -> None:
        super().__init__(inner)
        self.held: tuple[str, bytes] | None = None

    def create(self, key: str, data: bytes) -> str:
        if self.held is None and key.startswith("chunks/"):
            self.held = (key, bytes(data))
            raise StorageError("S3 create failed: timed out")
        return self.inner.create(key, data)

    def land(self) -> None:
        assert self.held is not None
        self.inner.create(*self.held)


def test_a_put_that_lands_after_its_timeout_is_never_served(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    storage = S3Storage(url, endpoint_url=moto.endpoint)
    with Broker(storage) as b:
        t = b.topic("t")
        t.append(b"one")
        late = AnswersLate(storage.bucket)
        storage.bucket = late  # type: ignore[assignment]
        with pytest.raises(StorageError):
            t.append(b"timed out")
        t.append(b"two")  # its chunk number is past the one given up
        late.land()  # the store applies the old request after all
        t.append(b"three")
        assert values(b, "t") == [b"one", b"two", b"three"]
        storage.bucket = late.inner  # type: ignore[assignment]
    with opened(moto, url, tmp_path / "other") as again:
        assert values(again, "t") == [b"one", b"two", b"three"]


def test_a_served_broker_stops_once_another_takes_its_bucket_over(
    moto: MotoServer, tmp_path: Path
) -> None:
    from tests.served import Served

    url = moto.fresh_url()
    cache = str(tmp_path / "cache")
    server = Served(
        tmp_path / "unused", "--storage", url, "--endpoint-url", moto.endpoint, "--cache-dir", cache
    )
    try:
        assert server.request("POST", "/v1/topics/t/records", b"before")[0] == 200
        with opened(moto, url, tmp_path / "newer", take_over=True) as newer:
            status, error = server.request("POST", "/v1/topics/t/records", b"after")
            assert status == 409 and error["error"]["code"] == "fenced"
            assert server.process.wait(timeout=30) == 1, "the fenced server exits non-zero"
            assert values(newer, "t") == [b"before"]
    finally:
        server.close()


class NeverReplaces(Wrapped):
    """A bucket whose manifest writes fail without landing: the process dies before them."""

    def replace(self, key: str, data: bytes, etag: str) -> str:
        raise StorageError("S3 replace failed: connection reset")


def test_a_cut_never_deletes_or_rewrites_a_chunk(moto: MotoServer) -> None:
    """Cutting synced bytes back (a round that failed after its bytes were synced) keeps
    every chunk number used once: a fence and every reader's table stay right, and a
    crash between the steps leaves the old bytes whole, followed by the kept head."""
    url = moto.fresh_url()
    storage = S3Storage(url, endpoint_url=moto.endpoint)
    storage.lock()
    file = storage.create_appendable("seg/a", b"head")
    for part in (b"one", b"two"):
        file.append([part])
        file.sync()
    prefix = storage.catalog().files["seg/a"].chunks
    assert prefix is not None
    before = {key: storage.bucket.get(key) for key, _ in storage.bucket.list(prefix)}
    file.truncate(len(b"headon"))
    assert storage.read_all("seg/a") == b"headon"
    for key, found in before.items():
        assert storage.bucket.get(key) == found, f"{key} was changed"
    file.append([b"X"])
    file.sync()
    assert storage.read_all("seg/a") == b"headonX"
    # A crash after the head is put, before the catalog gives the old chunks up:
    file.append([b"more"])
    file.sync()
    storage.bucket = NeverReplaces(storage.bucket)  # type: ignore[assignment]
    with pytest.raises(StorageError):
        file.truncate(len(b"headonXm"))
    storage.bucket = storage.bucket.inner  # type: ignore[attr-defined]
    storage.close()
    again = S3Storage(url, endpoint_url=moto.endpoint)
    again.lock()
    stored = again.read_all("seg/a")
    assert stored is not None and stored.startswith(b"headonXmore"), stored
    again.close()


def test_missing_credentials_are_named_not_a_metadata_error(moto: MotoServer) -> None:
    """Without credentials the client asks the instance-metadata address; the error then
    says which variables to set (on a Spark executor, too)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = SRC
    script = (
        "import brook, sys\n"
        "try:\n"
        f"    brook.open({moto.fresh_url()!r}, endpoint_url={moto.endpoint!r}, read_only=True)\n"
        "except brook.errors.BrookError as exc:\n"
        "    print(exc.message)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert "no AWS credentials were found" in out.stdout, out.stdout + out.stderr
    assert "AWS_ACCESS_KEY_ID" in out.stdout and "spark.executorEnv" in out.stdout


def test_a_missing_bucket_is_named_with_its_endpoint(moto: MotoServer, tmp_path: Path) -> None:
    """Not a truncated XML 404: the bucket, where it was looked for, and what to check."""
    for read_only in (False, True):
        with pytest.raises(StorageError) as caught:
            opened(moto, "s3://no-such-bucket/p", tmp_path / "cache", read_only=read_only)
        message = caught.value.message
        assert message.startswith(f"bucket no-such-bucket at {moto.endpoint}"), message
        assert "does not exist" in message and "--endpoint-url" in message
        assert "<?xml" not in message


def test_a_start_lists_every_files_chunks_in_slices_as_a_listing_per_file_would(
    moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At start the chunks of every appendable file are listed in slices read side by
    side (not one LIST per file): each file's table must be the one its own listing
    gives, across slice edges and with a deleted topic's chunks between them."""
    url = moto.fresh_url()
    first = opened(moto, url, tmp_path / "cache", linger_ms=0)
    for n in range(13):
        first.create_topic(f"t{n}")
        for _ in range(n % 4):
            first.topic(f"t{n}").append(b"record of %d" % n)
    first.delete_topic("t5")
    first.close()
    monkeypatch.setattr(limits, "s3_listing_slice_files", 3)
    storage = S3Storage(url, endpoint_url=moto.endpoint, cache_dir=tmp_path / "cache-2")
    storage.lock()
    try:
        entries = [e for e in storage.catalog().files.values() if e.chunks is not None]
        assert len(entries) > 10
        before = storage.bucket.counts.requests["list"]
        sliced = storage.load_tables(entries)
        assert storage.bucket.counts.requests["list"] - before == -(-len(entries) // 3)
        one_by_one = [storage.load_table(e) for e in entries]
        assert [(t.prefix, t.first_seq, t.sizes) for t in sliced] == [
            (t.prefix, t.first_seq, t.sizes) for t in one_by_one
        ]
    finally:
        storage.close()
    again = opened(moto, url, tmp_path / "cache-3")
    assert values(again, "t7") == [b"record of 7"] * 3
    again.close()
