"""One suite for every storage backend: the port's contract (storage/__init__.py)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from brook import layout
from brook.errors import ReadOnly, StorageError
from brook.storage import Storage, Superseded
from brook.storage.faulty import FaultyStorage
from brook.storage.local import LocalStorage
from brook.storage.location import open_public
from brook.storage.memory import MemoryStorage
from brook.storage.s3 import S3Storage
from tests.lake.outside import Outside
from tests.s3server import MotoServer


@pytest.fixture(params=["local", "memory", "s3", "faulty-local", "faulty-memory"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    kind: str = request.param
    inner: Storage
    if kind.endswith("local"):
        inner = LocalStorage(tmp_path / "s")
    elif kind == "s3":
        moto: MotoServer = request.getfixturevalue("moto")
        inner = S3Storage(moto.fresh_url(), endpoint_url=moto.endpoint, cache_dir=tmp_path / "c")
    else:
        inner = MemoryStorage()
    store = FaultyStorage(inner) if kind.startswith("faulty") else inner
    store.lock()
    yield store
    store.close()


def test_write_atomic_then_read_all(storage: Storage) -> None:
    assert storage.read_all("a/b.json") is None
    storage.write_atomic("a/b.json", b"one")
    storage.write_atomic("a/b.json", b"two")
    assert storage.read_all("a/b.json") == b"two"


def test_list_is_sorted_recursive_and_limited_to_the_prefix(storage: Storage) -> None:
    for name in ["t/x/2", "t/x/1", "t/y/0/3", "u/1"]:
        storage.write_atomic(name, b"")
    assert storage.list("t/") == ["t/x/1", "t/x/2", "t/y/0/3"]
    assert storage.list("t/x/") == ["t/x/1", "t/x/2"]
    assert storage.list("nothing/") == []


def test_appendable_grows_and_reads_back(storage: Storage) -> None:
    file = storage.create_appendable("seg/1", b"head")
    file.append([b"ab", b"cd"])
    file.sync()
    file.append([b"ef"])
    assert file.size() == 10, "the size counts bytes not yet synced"
    file.sync()
    reader = storage.open_read("seg/1")
    assert reader.read(0, 100) == b"headabcdef"
    assert reader.read(4, 2) == b"ab"
    assert reader.size() == 10
    reader.close()
    file.close()


def test_one_append_may_hold_more_parts_than_one_system_call_takes(storage: Storage) -> None:
    file = storage.create_appendable("seg/many", b"")
    parts = [bytes([i % 256]) * (i % 7 + 1) for i in range(3000)]  # IOV_MAX is 1024 on Linux
    file.append([*parts[:1500], memoryview(b"".join(parts[1500:]))])
    file.append(parts)
    file.sync()
    reader = storage.open_read("seg/many")
    assert reader.read(0, file.size()) == b"".join(parts) * 2
    reader.close()
    file.close()


def test_truncate_drops_the_tail(storage: Storage) -> None:
    file = storage.create_appendable("seg/2", b"head")
    file.append([b"0123456789"])
    file.truncate(6)
    file.append([b"X"])
    file.sync()
    file.close()
    assert storage.read_all("seg/2") == b"head01X"
    again = storage.open_appendable("seg/2")
    assert again.size() == 7
    again.close()


def test_delete_and_delete_prefix(storage: Storage) -> None:
    for name in ["p/a/1", "p/a/2", "p/b", "q"]:
        storage.write_atomic(name, b"x")
    storage.delete("p/b")
    storage.delete("p/b")  # deleting twice is fine
    storage.delete_prefix("p/a/")
    assert storage.list("p/") == []
    assert storage.read_all("q") == b"x"
    storage.delete_prefix("nothing/")


def test_public_files_are_created_read_listed_and_deleted(storage: Storage) -> None:
    files = storage.public()
    assert files.read("lake/t/m.json") is None
    files.create("lake/t/0/a.parquet", b"a")
    files.create("lake/t/1/b.parquet", b"b")
    version = files.replace("lake/t/m.json", b"one", None)
    found = files.read("lake/t/m.json")
    assert found is not None and found[0] == b"one"
    files.replace("lake/t/m.json", b"two", version)
    assert files.list("lake/t/") == ["lake/t/0/a.parquet", "lake/t/1/b.parquet", "lake/t/m.json"]
    files.delete(["lake/t/0/a.parquet", "lake/t/0/a.parquet"])  # twice is fine
    assert files.list("lake/t/") == ["lake/t/1/b.parquet", "lake/t/m.json"]
    files.delete_prefix("lake/t/")
    assert files.list("lake/") == [] and files.read("lake/t/m.json") is None
    assert files.url("lake/x").endswith("/lake/x")


def test_public_files_on_s3_are_plain_objects_replaced_only_at_their_version(
    moto: MotoServer, tmp_path: Path
) -> None:
    url = moto.fresh_url()
    storage = S3Storage(url, endpoint_url=moto.endpoint, cache_dir=tmp_path / "c")
    storage.lock()
    try:
        files = storage.public()
        assert files.epoch == 1 and files.url("lake/m") == f"{url}/lake/m"
        first = files.replace("lake/m", b"one", None)
        with pytest.raises(Superseded):
            files.replace("lake/m", b"other", None)  # it exists now
        second = files.replace("lake/m", b"two", first)
        with pytest.raises(Superseded):
            files.replace("lake/m", b"three", first)  # someone replaced it since
        assert files.replace("lake/m", b"two", first) == second  # a retry that landed
        files.create("lake/f", b"data")
        files.create("lake/f", b"data")  # a retry that landed
        with pytest.raises(StorageError, match="did not write"):
            files.create("lake/f", b"else")
        assert storage.list("lake/") == [], "not in Brook's catalog"
        outside = Outside({"location": url, "endpoint_url": moto.endpoint})
        with outside.fs.open_input_stream(outside.path("lake/f")) as stream:
            assert stream.read() == b"data", "a plain object at its name"
        reader = open_public(url, {"endpoint_url": moto.endpoint})
        assert reader.read("lake/m") == (b"two", second)
        with pytest.raises(ReadOnly):
            reader.create("lake/g", b"x")
    finally:
        storage.close()


def test_opening_a_missing_file_is_a_storage_error(storage: Storage) -> None:
    with pytest.raises(StorageError):
        storage.open_read("missing")
    with pytest.raises(StorageError):
        storage.open_appendable("missing")


def test_memory_crash_keeps_exactly_what_was_synced() -> None:
    store = MemoryStorage()
    file = store.create_appendable("f", b"H")
    file.append([b"synced"])
    file.sync()
    file.append([b"lost"])
    store.write_atomic("meta", b"kept")
    after = store.crash()
    assert after.read_all("f") == b"Hsynced"
    assert after.read_all("meta") == b"kept"


def test_local_temp_files_are_not_listed(tmp_path: Path) -> None:
    store = LocalStorage(tmp_path)
    store.write_atomic("d/x", b"1")
    (tmp_path / "d" / ".x.tmp").write_bytes(b"partial")
    assert store.list("d/") == ["d/x"]


def test_local_start_sweeps_what_a_crash_left_half_done(tmp_path: Path) -> None:
    """Temporaries and folders being deleted live in `.scratch/`, emptied at every
    start; a directory an older Brook left (no `.scratch/`) is swept everywhere once."""
    store = LocalStorage(tmp_path)
    store.write_atomic("topics/a/topic.json", b"{}")
    store.write_atomic("topics/b/topic.json", b"{}")
    scratch = tmp_path / layout.SCRATCH
    # A crash between the rename into scratch and the removal, and one mid atomic write.
    os.rename(tmp_path / "topics" / "b", scratch / "1-0.trash")
    (scratch / "1-1.tmp").write_bytes(b"partial")
    LocalStorage(tmp_path).sweep_trash()
    assert list(scratch.iterdir()) == []
    assert store.list("") == ["topics/a/topic.json"]

    # What an older Brook left beside the files, in a directory with no scratch folder.
    shutil.rmtree(scratch)
    (tmp_path / "topics" / ".trash-c-1-2").mkdir()
    (tmp_path / "topics" / ".trash-c-1-2" / "topic.json").write_bytes(b"{}")
    (tmp_path / "topics" / "a" / ".topic.json.7.tmp").write_bytes(b"partial")
    LocalStorage(tmp_path).sweep_trash()
    assert sorted(p.name for p in (tmp_path / "topics").iterdir()) == ["a"]
    assert os.listdir(tmp_path / "topics" / "a") == ["topic.json"]
    assert scratch.is_dir()
    store.delete_prefix("topics/a/")
    assert store.list("") == [] and list(scratch.iterdir()) == []


def test_the_faulty_wrapper_defines_every_method_of_the_port() -> None:
    """Whatever it does not define passes through to the inner storage unfaulted
    (`__getattr__`): a method added to the port must be added to the wrapper too, or the
    fault tests would silently stop covering it."""
    port = {name for name in dir(Storage) if not name.startswith("_")}
    assert port, "the port lists its methods"
    assert port - set(vars(FaultyStorage)) == set()
