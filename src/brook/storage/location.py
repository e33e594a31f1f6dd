"""Where a broker's data lives, from the one string users give: the one parser.

`brook.open`, the Spark data sources' outside readers and every CLI command
understand the same locations:

- a directory path, or `file://DIR`: local disk (the embedded default);
- `s3://bucket/prefix`: an S3-compatible object store;
- `memory://`: in this process's memory, for tests and experiments.

`parse` checks the string and says which; `open_storage` builds the backend with
the options that apply to it and refuses the ones that do not, by name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from brook.errors import BadRequest, NotFound
from brook.storage import PublicFiles, Storage

Kind = Literal["local", "s3", "memory"]

FORMS = "a directory path, file://DIR, s3://bucket/prefix or memory://"

LOCAL_OPTIONS = frozenset({"preallocate_bytes", "open_files_max"})
S3_OPTIONS = frozenset(
    {
        "endpoint_url",
        "region",
        "cache_dir",
        "cache_bytes",
        "request_timeout_s",
        "take_over",
        "wait_for_lease",
        "lease_ms",
        "write_ahead_log",
    }
)
S3_READER_OPTIONS = frozenset({"endpoint_url", "region", "request_timeout_s"})
"""What an outside reader (Spark) may set: it caches nothing and owns nothing."""
OWNER_ONLY = ("take_over", "wait_for_lease", "lease_ms", "write_ahead_log")


@dataclass(frozen=True)
class Location:
    kind: Kind
    target: str
    """The directory (local), the s3:// URL (s3), or "" (memory)."""

    def __str__(self) -> str:
        return {"local": self.target, "s3": self.target, "memory": "memory://"}[self.kind]


def parse(location: object) -> Location:
    """The location a string (or a path object: a local directory) names; BadRequest
    saying the accepted forms otherwise."""
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    if not isinstance(location, str) or not location.strip():
        raise BadRequest(f"a storage location must be {FORMS}, not {location!r}")
    if location.startswith("s3://"):
        bucket = location[len("s3://") :].partition("/")[0]
        if not bucket:
            raise BadRequest(f"{location!r} names no bucket: use s3://bucket/prefix")
        return Location("s3", location)
    if location == "memory://":
        return Location("memory", "")
    if location.startswith("file://"):
        location = location.removeprefix("file://")
        if not location:
            raise BadRequest("file:// names no directory: use file:///path/to/dir")
    elif "://" in location:
        raise BadRequest(f"unsupported storage {location!r}: use {FORMS}")
    return Location("local", location)


def split_options(location: Location, options: dict[str, Any]) -> dict[str, Any]:
    """Take the storage options of `location`'s kind out of `options` (what is left
    is the broker's); BadRequest for an option of another kind of storage."""
    own = {"local": LOCAL_OPTIONS, "s3": S3_OPTIONS, "memory": frozenset()}[location.kind]
    taken = {name: options.pop(name) for name in list(options) if name in own}
    if location.kind != "local":
        for name in LOCAL_OPTIONS:
            if options.pop(name, None) is not None:
                raise BadRequest(f"{name} applies to a directory only, not {location}")
    if location.kind != "s3":
        for name in OWNER_ONLY:
            if options.pop(name, None):
                raise BadRequest(
                    f"{name} applies to s3:// storage only: a directory is locked while its "
                    "broker runs"
                )
        for name in S3_OPTIONS - set(OWNER_ONLY):
            if options.get(name) is not None:
                raise BadRequest(f"{name} applies to s3:// storage only, not {location}")
            options.pop(name, None)
    return taken


def open_storage(location: Location, options: dict[str, Any], *, must_exist: bool) -> Storage:
    """The backend for `location` with its `options` (from `split_options`). With
    `must_exist`, a local directory that is not there is NotFound (a reader's typo
    must not look like an empty broker)."""
    if location.kind == "s3":
        from brook.storage.s3 import S3Storage

        return S3Storage(location.target, **options)
    if location.kind == "memory":
        from brook.storage.memory import MemoryStorage

        return MemoryStorage()
    from brook.storage.local import LocalStorage

    if must_exist and not Path(location.target).is_dir():
        raise NotFound(f"no Brook data at {location.target}: the directory does not exist")
    return LocalStorage(location.target, **options)


def open_reader(location: str, options: dict[str, Any] | None = None) -> Storage:
    """The storage at `location`, attached as an outside reader (Spark): nothing is
    locked, cached or written. S3 options: endpoint_url, region, request_timeout_s.
    Raises BadRequest for a location that cannot be read this way, StorageError."""
    parsed, options = _reader_options(location, options)
    storage = open_storage(parsed, options, must_exist=True)
    if parsed.kind == "s3":
        storage.attach()
    return storage


def open_public(location: str, options: dict[str, Any] | None = None) -> PublicFiles:
    """The public files (the lake's) at `location`, to read only: on S3 plain objects,
    read without a look at Brook's catalog (one GET per file). Options as
    `open_reader`'s. Raises BadRequest, StorageError."""
    from brook.storage.readonly import ReadOnlyPublicFiles

    parsed, options = _reader_options(location, options)
    if parsed.kind == "s3":
        from brook.storage.s3.objects import Bucket
        from brook.storage.s3.public import S3PublicFiles

        return ReadOnlyPublicFiles(S3PublicFiles(Bucket(parsed.target, **options), _no_epoch))
    return ReadOnlyPublicFiles(open_storage(parsed, options, must_exist=True).public())


def _no_epoch() -> None:
    return None


def _reader_options(
    location: str, options: dict[str, Any] | None
) -> tuple[Location, dict[str, Any]]:
    parsed = parse(location)
    options = dict(options or {})
    if parsed.kind == "memory":
        raise BadRequest(
            "memory:// storage lives inside one process: it cannot be read from outside"
        )
    known = S3_READER_OPTIONS if parsed.kind == "s3" else frozenset()
    unknown = set(options) - known
    if unknown:
        raise BadRequest(
            f"unknown options for {parsed.kind} storage {sorted(unknown)}; known: {sorted(known)}"
        )
    if parsed.kind == "local" and not Path(parsed.target).is_dir():
        raise BadRequest(f"{parsed.target} is not a directory holding Brook data")
    return parsed, options
