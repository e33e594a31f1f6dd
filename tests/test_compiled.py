"""The compiled hot path: it is what runs, it behaves as its Python source does, and
BROOK_PURE or a stale build runs the Python instead (brook/compiled.py)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook import compiled
from brook.codec import batch
from brook.duplicate_keys import has_duplicates
from brook.records import Record

PURE = os.environ.get("BROOK_PURE", "") not in ("", "0")


def as_python(module: str) -> ModuleType:
    """A second copy of `module`, loaded from its .py source under another name."""
    spec = importlib.util.spec_from_file_location(
        f"as_python_{module.replace('.', '_')}", compiled.source_of(module)
    )
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_the_listed_modules_run_compiled_unless_brook_pure_is_set() -> None:
    running = compiled.running_compiled()
    if PURE:
        assert running == []
    else:
        assert compiled._built_digests(), (
            "Brook was installed without compiling (BROOK_COMPILE=0): "
            "run `make` to compile, or the tests with BROOK_PURE=1"
        )
        assert sorted(compiled._built_digests()) == sorted(compiled.MODULES)
        assert running == list(compiled.MODULES)
        assert compiled.stale() == []


def test_brook_pure_runs_every_listed_module_as_python() -> None:
    code = "import brook.compiled as c, brook.server.app; print(c.running_compiled())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, BROOK_PURE="1"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_a_source_changed_since_it_was_compiled_is_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    digests = {m: compiled.source_digest(compiled.source_of(m)) for m in compiled.MODULES}
    digests["brook.wire.core"] = "0" * 64
    monkeypatch.setattr(compiled, "_built_digests", lambda: digests)
    assert compiled.stale() == ["brook.wire.core"]


def test_a_compiled_file_its_build_did_not_record_is_never_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make run` compiles beside a running broker: a compiled file copied in place
    before compiled.json (written last) lists it may be half written."""
    built = compiled._built_digests()
    monkeypatch.setattr(compiled, "_built_digests", lambda: {})
    present = [m for m in compiled.MODULES if compiled._compiled_file(m) is not None]
    assert compiled.stale() == present
    if built:  # an installed build: every listed module has its compiled file
        assert present == list(compiled.MODULES)


def test_a_compiled_file_of_a_module_no_longer_listed_is_never_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older build's leftover (a module taken off the list) would still be preferred
    by Python to its edited source: the switch runs the source instead."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for name in ("server/api", "wire/core"):  # one no longer listed, one listed
        (tmp_path / "brook" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "brook" / f"{name}.py").write_text("")
        (tmp_path / "brook" / f"{name}{suffix}").write_bytes(b"")
    monkeypatch.setattr(compiled, "ROOT", tmp_path / "brook")
    assert compiled.leftovers() == ["brook.server.api"]


def test_the_switch_finds_the_python_source() -> None:
    finder = compiled._AsPython(frozenset({"brook.records"}))
    spec = finder.find_spec("brook.records")
    assert spec is not None and spec.origin == str(compiled.source_of("brook.records"))
    assert finder.find_spec("brook.topic") is None


# -------------------------------------------------- the same behaviour, compiled or not

python_batch = as_python("brook.codec.batch")
python_keys = as_python("brook.duplicate_keys")

names = st.text(max_size=8)
records = st.builds(
    Record,
    value=st.binary(max_size=64),
    key=st.none() | st.binary(max_size=16),
    headers=st.none() | st.dictionaries(names, st.binary(max_size=8), min_size=1, max_size=3),
)
idempotency = st.none() | st.binary(min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**40),
    st.integers(0, 2**45),
    st.lists(st.tuples(records, idempotency), min_size=1, max_size=16),
)
def test_batches_encode_and_decode_the_same_compiled_or_not(
    base: int, timestamp: int, pairs: list[tuple[Record, bytes | None]]
) -> None:
    chosen = [r for r, _ in pairs]
    keys = [k for _, k in pairs]
    parts = batch.encode_batch(base, timestamp, chosen, keys)
    assert parts == python_batch.encode_batch(base, timestamp, chosen, keys)
    body = b"".join(parts)
    header = batch.parse_header(body, 0)
    assert isinstance(header, tuple)
    assert tuple(header) == tuple(python_batch.parse_header(body, 0))
    ours, theirs = (
        batch.decode_columns(body, 0, header),
        python_batch.decode_columns(body, 0, python_batch.parse_header(body, 0)),
    )
    for column in ("values", "keys", "headers", "idempotency"):
        assert getattr(ours, column) == getattr(theirs, column)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(st.tuples(st.sampled_from('ab:\\"'), inner), max_size=4)
    ),
    max_leaves=12,
)


def _json(value: object) -> str:
    """JSON text in which a list of pairs is an object that may repeat a name."""
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        return "{" + ",".join(f"{json.dumps(k)}: {_json(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    return json.dumps(value)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_repeated_names_are_found_the_same_compiled_or_not(value: object) -> None:
    body = _json(value).encode()
    decoded = json.loads(body)
    assert has_duplicates(body, decoded) == python_keys.has_duplicates(body, decoded)
