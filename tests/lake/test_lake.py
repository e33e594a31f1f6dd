"""The lake as its users meet it: every acknowledged record once, in files any Parquet
reader reads (pyarrow and DuckDB here), on local disk and S3; the lag; retention and
deletion; merges of small files; and the surfaces (embedded, HTTP, CLI)."""

from __future__ import annotations

import contextlib
import http.server
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pyarrow.parquet as pq
import pytest

import brook
from brook import layout, limits
from brook.errors import BadRequest, BrookError, Fenced, LakeOff, TopicNotFound
from brook.lake import parquet
from brook.lake.tables import LakeTable
from tests.lake.outside import Outside, Row
from tests.s3server import MotoServer
from tests.served import Served
from tests.waiting import slow, wait_for


@pytest.fixture(params=["local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    if request.param == "local":
        yield {"location": str(tmp_path / "data")}
        return
    moto: MotoServer = request.getfixturevalue("moto")
    yield {
        "location": moto.fresh_url(),
        "endpoint_url": moto.endpoint,
        "cache_dir": str(tmp_path / "cache"),
    }


def opened(where: dict[str, Any], **options: Any) -> brook.Broker:
    return brook.open(
        where["location"], **{k: v for k, v in where.items() if k != "location"}, **options
    )


def fill(b: brook.Broker, topic: str, batches: int, per_batch: int = 40) -> None:
    t = b.topic(topic)
    for i in range(batches):
        t.append_many(
            [
                brook.Record(
                    value=f"value {i}-{j} ".encode() * 3,
                    key=None if j % 4 == 0 else f"k{j % 7}".encode(),
                    headers={"n": str(j).encode()} if j % 3 == 0 else None,
                )
                for j in range(per_batch)
            ]
        )


def source_rows(b: brook.Broker, topic: str) -> list[Row]:
    rows: list[Row] = []
    for partition in b.topic(topic).end_offsets():
        offset = min(p.start_offset for p in b.partitions(topic) if p.partition == partition)
        while True:
            got = b.topic(topic).read(partition, offset, 1000)
            if not got:
                break
            for r in got:
                headers = tuple(sorted((r.headers or {}).items()))
                rows.append((r.partition, r.offset, r.timestamp, r.key, r.value, headers))
            offset = got[-1].offset + 1
    return rows


def test_the_lake_holds_every_acknowledged_record_once(location: dict[str, Any]) -> None:
    with opened(location, lake=True, lake_lag_ms=3_600_000, segment_bytes_max=8192) as b:
        b.create_topic("orders", partitions=3)
        fill(b, "orders", 30)
        statuses = b.lake_sync("orders")
        assert [s.topic for s in statuses] == ["orders"]
        assert statuses[0].pending == 0 and statuses[0].rows == 1200
        outside = Outside(location)
        assert Counter(outside.rows("orders")) == Counter(source_rows(b, "orders"))
        fill(b, "orders", 3)  # an active tail the lag keeps out...
        assert b.lake_status("orders")[0].pending == 120
        b.lake_sync()  # ...until a sync
        assert Counter(outside.rows("orders")) == Counter(source_rows(b, "orders"))
        files = outside.files("orders")
        assert {f.partition for f in files} == {0, 1, 2} and len(files) > 3
        metadata = pq.read_metadata(outside.path(files[0].name), filesystem=outside.fs)
        statistics = metadata.row_group(0).column(1).statistics  # offset
        assert statistics is not None and statistics.has_min_max
        assert statistics.min == files[0].first


def test_a_topic_joining_the_lake_has_its_empty_manifest_at_once(
    location: dict[str, Any],
) -> None:
    """A reader going by the manifest finds a new topic's table empty, not missing,
    long before the lag lets its first records in."""
    with opened(location, lake=True, lake_lag_ms=3_600_000) as b:
        fill(b, "orders", 1)  # made by its first append
        outside = Outside(location)
        manifest = layout.lake_manifest_in(layout.lake_topic("orders"))
        wait_for(lambda: manifest in outside.listing("orders"), 10, "the new topic's manifest")
        assert outside.manifest("orders")["files"] == []
        assert b.lake_status("orders")[0].pending == 40
        # Whoever globs the folder finds a note saying a glob is not the table.
        note = layout.lake_note("orders")
        wait_for(lambda: note in outside.listing("orders"), 10, "the note for globbers")
        with outside.fs.open_input_file(outside.path(note)) as f:
            said = f.read().decode()
        assert "manifest.json" in said and "not the table" in said


def test_duckdb_reads_the_lake_by_its_manifest_as_the_format_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "lake_merge_files", 3)
    with brook.open(tmp_path / "brook-data", lake=True, segment_bytes_max=1 << 20) as b:
        b.create_topic("orders", partitions=2)
        for _ in range(4):
            fill(b, "orders", 2)
            b.lake_sync()  # small files of the active segments, then merged
        expected = Counter((r[0], r[1], r[4]) for r in source_rows(b, "orders"))
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect()
    con.sql(  # docs/FORMAT.md, "Lake": the recipe, word for word
        """SET VARIABLE files = (
  SELECT list('brook-data/' || f.name)
  FROM (SELECT unnest(files) AS f FROM read_json('brook-data/lake/topics/orders/manifest.json')));"""
    )
    got = con.sql(
        """SELECT "partition", "offset", value FROM read_parquet(getvariable('files'))"""
    ).fetchall()
    assert Counter(got) == expected
    globbed = con.sql("SELECT count(*) FROM 'brook-data/lake/topics/orders/*/*.parquet'")
    assert globbed.fetchall()[0][0] > len(got), "the merged files are still in the folder"
    note = (tmp_path / "brook-data" / layout.lake_note("orders")).read_text()
    assert "A glob of *.parquet here is not the table" in note  # and the folder says so


def test_the_writer_keeps_the_lake_within_its_lag(tmp_path: Path) -> None:
    with brook.open(tmp_path / "data", lake=True, lake_lag_ms=0) as b:
        fill(b, "events", 5)
        deadline = time.monotonic() + slow(20)
        while b.lake_status("events")[0].pending and time.monotonic() < deadline:
            time.sleep(0.2)
        status = b.lake_status("events")[0]
        assert status.pending == 0 and status.rows == 200


def test_retention_and_deletion_take_the_lake_s_files_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "lake_merge_files", 1_000)  # a file per segment
    with brook.open(tmp_path / "data", lake=True, segment_bytes_max=4096) as b:
        b.create_topic("short", retention_bytes=8192)
        fill(b, "short", 20)
        b.lake_sync()
        outside = Outside(tmp_path / "data")
        before = outside.files("short")
        b.core.run_maintenance()  # retention deletes the oldest segments
        b.lake_sync()
        after = outside.files("short")
        start = b.partitions("short")[0].start_offset
        assert start > 0 and len(after) < len(before)
        assert all(f.next > start for f in after)
        kept = [r for r in outside.rows("short") if r[1] >= start]
        assert Counter(kept) == Counter(source_rows(b, "short"))
        b.delete_topic("short")
        assert outside.listing("short") == []


def test_small_files_are_merged_and_the_old_ones_deleted_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "lake_merge_files", 3)
    now = [1_800_000_000.0]
    with brook.open(tmp_path / "data", lake=True, clock=lambda: now[0]) as b:
        for _ in range(3):
            fill(b, "tiny", 1)
            b.lake_sync()  # one small file each time
        outside = Outside(tmp_path / "data")
        files = outside.files("tiny")
        assert len(files) == 1 and (files[0].first, files[0].next) == (0, 120)
        retired = outside.manifest("tiny")["retired"]
        assert len(retired) == 3
        assert Counter(outside.rows("tiny")) == Counter(source_rows(b, "tiny"))
        now[0] += limits.lake_retire_ms / 1000 + 1
        b.lake_sync()
        names = outside.listing("tiny")
        assert sorted(n for n in names if n.endswith(".parquet")) == [files[0].name]


def test_bad_requests_of_the_lake_say_what_is_wrong(tmp_path: Path) -> None:
    with brook.open(tmp_path / "off") as b:
        b.topic("t").append(b"x")
        with pytest.raises(LakeOff, match="the lake is off"):
            b.lake_sync()
        assert b.lake_status("t")[0].pending == 1  # status works without the writer
    with brook.open(tmp_path / "on", lake=True) as b:
        with pytest.raises(TopicNotFound):
            b.lake_sync("missing")
        with pytest.raises(BadRequest):
            b.lake_sync("__queues")


def test_the_lake_over_http_and_the_command_line(tmp_path: Path) -> None:
    served = Served(tmp_path / "data", "--lake", "--lake-lag-ms", "3600000")
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}") as client:
            fill(client, "web", 4)  # type: ignore[arg-type]
            assert client.lake_status("web")[0].pending == 160
            synced = client.lake_sync("web")
            assert synced[0].pending == 0 and synced[0].rows == 160
            with pytest.raises(TopicNotFound):
                client.lake_sync("nope")
        cli = [sys.executable, "-m", "brook.cli", "lake"]
        shown = subprocess.run(
            [*cli, "status", "--data", str(tmp_path / "data")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert shown.startswith("web\t1 file\t160 rows") and "pending=0" in shown
        refused = subprocess.run(
            [*cli, "sync", "--data", str(tmp_path / "data")], capture_output=True, text=True
        )
        assert refused.returncode != 0 and "--url" in refused.stderr
        assert "Traceback" not in refused.stderr
        via_url = subprocess.run(
            [*cli, "sync", "--url", f"http://127.0.0.1:{served.port}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert via_url.startswith("web\t")
    finally:
        served.close()
    done = subprocess.run(
        [sys.executable, "-m", "brook.cli", "lake", "sync", "--data", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "pending=0" in done
    manifest = json.loads((tmp_path / "data" / layout.lake_manifest("web")).read_text())
    assert sum(f["rows"] for f in manifest["files"]) == 160


def test_a_sync_whose_broker_dies_says_it_was_cut_short_and_what_the_lake_holds(
    tmp_path: Path,
) -> None:
    served = Served(tmp_path / "data", "--lake", "--lake-lag-ms", "3600000")
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}") as client:
            fill(client, "web", 2)  # type: ignore[arg-type]
            client.lake_sync()
        where = httpx.get(f"http://127.0.0.1:{served.port}/v1/lake").content
    finally:
        served.close()

    class DiesMidSync(http.server.BaseHTTPRequestHandler):
        """Answers where the lake stands; drops every sync half-way (a broker killed)."""

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(where)))
            self.end_headers()
            self.wfile.write(where)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            self.close_connection = True  # no answer: the connection just ends

        def log_message(self, *args: Any) -> None:
            pass

    stub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), DiesMidSync)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    try:
        cut = subprocess.run(
            [sys.executable, "-m", "brook.cli", "lake", "sync", "--url",
             f"http://127.0.0.1:{stub.server_address[1]}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        stub.shutdown()
        stub.server_close()
    assert cut.returncode == 1 and "Traceback" not in cut.stderr
    (line,) = cut.stderr.strip().splitlines()
    assert "the lake's sync was cut short" in line and "80 rows of 1 topic" in line, line


def test_a_topic_s_own_lake_setting_decides_over_the_broker_s(tmp_path: Path) -> None:
    with brook.open(tmp_path / "off") as b:  # the broker's lake is off...
        assert b.create_topic("kept", lake=True).lake is True
        b.topic("kept").append(b"in the lake")
        b.topic("plain").append(b"not")
        assert [s.topic for s in b.lake_sync()] == ["kept"]  # ...but this topic's is on
        outside = Outside(tmp_path / "off")
        assert outside.files("kept") and not outside.files("plain")
        with pytest.raises(LakeOff, match="not in the lake"):
            b.lake_sync("plain")
    with brook.open(tmp_path / "off") as b:  # a reopened broker writes it again
        b.topic("kept").append(b"more")
        assert b.lake_sync("kept")[0].rows == 2
    with brook.open(tmp_path / "on", lake=True) as b:
        b.create_topic("skipped", lake=False)
        b.topic("skipped").append(b"x")
        b.topic("default").append(b"y")
        assert [s.topic for s in b.lake_sync()] == ["default"]
        assert [t.lake for t in sorted(b.topics(), key=lambda t: t.name)] == [None, False]


def test_one_topic_s_failing_lake_is_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic whose lake cannot be written shows as failing; the others are written and
    the broker stays healthy."""
    stored = parquet.store

    def failing_for_bad(files: Any, prefix: str, *args: Any) -> Any:
        if prefix == layout.lake_topic("bad"):
            raise OSError("no space left on device")
        return stored(files, prefix, *args)

    monkeypatch.setattr(parquet, "store", failing_for_bad)
    with brook.open(tmp_path / "data", lake=True, lake_lag_ms=0) as b:
        fill(b, "bad", 1)
        fill(b, "good", 1)
        deadline = time.monotonic() + slow(20)
        while b.lake_status("good")[0].pending and time.monotonic() < deadline:
            time.sleep(0.2)
        assert b.lake_status("good")[0].pending == 0
        assert b.lake_status("bad")[0].pending == 40
        assert b.failing() == []  # the broker's own loops are healthy
        shown = [f for f in b.supervisor.isolated() if f.subject == "topic bad"]
        assert shown and "no space left" in shown[0].error


def test_a_broker_taken_over_on_s3_never_changes_the_lake_again(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    where = {"location": url, "endpoint_url": moto.endpoint}
    old = brook.open(url, endpoint_url=moto.endpoint, lake=True, lake_lag_ms=3_600_000)
    try:
        fill(old, "orders", 3)
        old.lake_sync("orders")
        fill(old, "orders", 2)  # acknowledged, not yet in the lake
        with brook.open(
            url, endpoint_url=moto.endpoint, lake=True, lake_lag_ms=3_600_000, take_over=True
        ) as new:
            fill(new, "orders", 1)
            assert new.lake_sync("orders")[0].rows == 240
            with pytest.raises(Fenced):
                old.lake_sync("orders")  # writes its tail, and its commit is refused
            outside = Outside(where)
            assert Counter(outside.rows("orders")) == Counter(source_rows(new, "orders"))
            manifest = outside.manifest("orders")
            named = {f["name"] for f in manifest["files"]}
            assert [n for n in outside.listing("orders") if n.endswith(".parquet")] == sorted(
                named
            ), "the fenced broker left a file behind"
            fill(new, "orders", 1)
            assert new.lake_sync("orders")[0].rows == 280
    finally:
        with contextlib.suppress(BrookError):
            old.close()


def test_a_fenced_broker_stops_writing_the_lake_at_once_and_its_sync_says_so(
    moto: MotoServer,
) -> None:
    """Topics the new owner has not claimed yet are not the fenced broker's to write:
    once it knows it was taken over, it writes not one more file there."""
    url = moto.fresh_url()
    where = {"location": url, "endpoint_url": moto.endpoint}
    old = brook.open(url, endpoint_url=moto.endpoint, lake=True, lake_lag_ms=3_600_000)
    try:
        for topic in ("a", "b"):
            fill(old, topic, 2)
        old.lake_sync()
        for topic in ("a", "b"):
            fill(old, topic, 1)  # acknowledged, not yet in the lake
        before = {t: Outside(where).listing(t) for t in ("a", "b")}
        with brook.open(url, endpoint_url=moto.endpoint, take_over=True):  # claims nothing
            with pytest.raises(Fenced):
                fill(old, "a", 1)  # the old broker learns it was taken over
            with pytest.raises(Fenced, match=r"cut short after 0 of 2 topics"):
                old.lake_sync()
            assert {t: Outside(where).listing(t) for t in ("a", "b")} == before
    finally:
        with contextlib.suppress(BrookError):
            old.close()


def test_the_command_line_syncs_and_shows_the_lake_on_s3(moto: MotoServer) -> None:
    url = moto.fresh_url()
    with brook.open(url, endpoint_url=moto.endpoint, lake=True, lake_lag_ms=3_600_000) as b:
        fill(b, "orders", 2)
    storage = ["--storage", url, "--endpoint-url", moto.endpoint]
    cli = [sys.executable, "-m", "brook.cli", "lake"]
    synced = subprocess.run([*cli, "sync", *storage], capture_output=True, text=True, check=True)
    assert synced.stdout.startswith("orders\t1 file\t80 rows") and "pending=0" in synced.stdout
    with brook.open(url, endpoint_url=moto.endpoint) as serving:  # status beside an owner
        serving.topic("orders").append(b"one more")
        shown = subprocess.run(
            [*cli, "status", "--topic", "orders", *storage],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert shown.startswith("orders\t1 file\t80 rows") and "pending=1" in shown
    assert Counter(
        r[1] for r in Outside({"location": url, "endpoint_url": moto.endpoint}).rows("orders")
    ) == Counter(range(80))


def test_a_topic_deleted_during_a_lake_pass_leaves_no_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = parquet.store
    with brook.open(tmp_path / "data", lake=True, lake_lag_ms=3_600_000) as b:

        def deleting_first(files: Any, prefix: str, *args: Any) -> Any:
            if prefix == layout.lake_topic("gone") and b.core.has_topic("gone"):
                b.delete_topic("gone")  # while this pass is about to store its file
            return stored(files, prefix, *args)

        monkeypatch.setattr(parquet, "store", deleting_first)
        fill(b, "gone", 2)
        with pytest.raises(TopicNotFound):
            b.lake_sync("gone")
        assert Outside(tmp_path / "data").listing("gone") == []


def test_asking_where_the_lake_stands_again_reads_nothing_new_from_s3(
    moto: MotoServer, tmp_path: Path
) -> None:
    """A dashboard refreshes every few seconds: the writer's broker answers from the
    manifests it stored and the views it keeps, not a GET per manifest and segment."""
    with brook.open(
        moto.fresh_url(),
        endpoint_url=moto.endpoint,
        cache_dir=str(tmp_path / "cache"),
        lake=True,
        lake_lag_ms=3_600_000,
        segment_bytes_max=4096,
    ) as b:
        fill(b, "orders", 10)
        q = b.queue("orders", "g")
        q.ack(q.lease(timeout=0))
        b.lake_sync()
        first = b.lake_status("orders")[0]
        before = dict(b.storage_stats().requests)
        again = b.lake_status("orders")[0]
        after = b.storage_stats().requests
        assert again == first and first.files > 1 and first.histories
        assert after.get("get", 0) == before.get("get", 0), "no GET for an unchanged lake"


def test_lake_status_keeps_a_bounded_number_of_views(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "lake_watch_views_max", 2)
    with brook.open(tmp_path / "data", lake=True, lake_lag_ms=3_600_000) as b:
        for name in ("a", "b", "c"):
            fill(b, name, 1)
        for _ in range(2):
            assert [(s.topic, s.pending) for s in b.lake_status()] == [
                ("a", 40),
                ("b", 40),
                ("c", 40),
            ]
        assert list(b._lake_watch._views) == ["b", "c"]


def test_a_pass_skips_a_topic_level_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with brook.open(tmp_path / "data", lake=True, lake_lag_ms=3_600_000) as b:
        fill(b, "idle", 1)
        b.lake_sync("idle")
        assert b.lake is not None
        view = b.lake._known[LakeTable("idle")].view
        looked: list[int] = []
        extents = view.extents
        monkeypatch.setattr(view, "extents", lambda p: looked.append(p) or extents(p))
        b.lake_sync("idle")
        assert looked == [], "an idle topic's segments were looked at again"
        fill(b, "idle", 1)
        assert b.lake_sync("idle")[0].rows == 80 and looked


def test_a_new_owner_on_s3_deletes_files_no_manifest_names(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    with brook.open(url, endpoint_url=moto.endpoint, lake=True, lake_lag_ms=3_600_000) as b:
        fill(b, "orders", 1)
        b.lake_sync()
        stray = layout.lake_file_in(layout.lake_topic("orders"), 0, 40, 80, "deadbeef")
        b.storage.public().create(stray, b"written, then a crash before the manifest named it")
    outside = Outside({"location": url, "endpoint_url": moto.endpoint})
    assert stray in outside.listing("orders")
    with brook.open(url, endpoint_url=moto.endpoint, lake=True, lake_lag_ms=3_600_000) as b:
        assert b.lake_sync()[0].rows == 40
    assert stray not in outside.listing("orders")
    assert Counter(r[1] for r in outside.rows("orders")) == Counter(range(40))


def test_files_a_newer_owner_writes_while_a_sweep_lists_are_not_deleted(
    moto: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from brook.storage.s3.public import S3PublicFiles

    url = moto.fresh_url()
    with brook.open(url, endpoint_url=moto.endpoint, lake=True, lake_lag_ms=3_600_000) as b:
        fill(b, "orders", 1)
        b.lake_sync()
    newer = layout.lake_file_in(layout.lake_topic("orders"), 0, 40, 80, "0e0e0e0e")
    listed = S3PublicFiles.list

    def list_while_a_newer_owner_claims(self: S3PublicFiles, prefix: str) -> list[str]:
        if prefix == layout.lake_topic("orders") and self.read(newer) is None:
            name = layout.lake_manifest_in(prefix)
            found = self.read(name)
            assert found is not None
            claimed = json.loads(found[0]) | {"writer_epoch": 99}
            self.replace(name, json.dumps(claimed).encode(), found[1])
            self.create(newer, b"a newer owner's file, not yet in its manifest")
        return listed(self, prefix)

    monkeypatch.setattr(S3PublicFiles, "list", list_while_a_newer_owner_claims)
    with (
        brook.open(url, endpoint_url=moto.endpoint, lake=True, lake_lag_ms=3_600_000) as b,
        pytest.raises(Fenced),
    ):
        b.lake_sync("orders")
    assert newer in Outside({"location": url, "endpoint_url": moto.endpoint}).listing("orders")
