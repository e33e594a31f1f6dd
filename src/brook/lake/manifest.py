"""The lake's manifest of a topic: which Parquet files hold which offsets. Pure: no I/O.

A file is written whole (atomically) before the manifest names it, and the manifest
itself is replaced atomically, so a reader that goes by the manifest only ever reads
whole files, and a crash at any step leaves at worst a file no manifest names (an
orphan, removed by the next writer). Files a merge replaced stay readable for
`limits.lake_retire_ms` before they are deleted, so a reader planned on the older
manifest finishes.

Per partition the files are kept in offset order, without overlap; between two
files there may be a gap only where retention deleted the records before the lake
had them (`covered` says where the lake starts and ends).
"""

from __future__ import annotations

import msgspec

MANIFEST_VERSION = 1


class LakeFile(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """One Parquet file: offsets [first, next) of a partition (rows may be fewer than
    next - first on a compacted topic)."""

    partition: int
    first: int
    next: int
    name: str
    rows: int
    bytes: int
    min_timestamp_ms: int
    max_timestamp_ms: int


class Retired(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """A file no longer named by the manifest, deleted once `at_ms` is old enough."""

    name: str
    at_ms: int


class Manifest(msgspec.Struct, forbid_unknown_fields=False):
    version: int = MANIFEST_VERSION
    files: list[LakeFile] = msgspec.field(default_factory=list)
    retired: list[Retired] = msgspec.field(default_factory=list)
    writer_epoch: int | None = None
    """On S3, the epoch of the broker that last wrote it: one that finds a higher
    epoch here was taken over and writes the lake no more."""
    reached: dict[int, int] = msgspec.field(default_factory=dict)
    """Per partition, the offset after the last one the lake took: kept when the
    files that held it are retired, so what was taken once is never taken again."""

    def of(self, partition: int) -> list[LakeFile]:
        """The files of `partition`, in offset order."""
        return [f for f in self.files if f.partition == partition]

    def end(self, partition: int) -> int | None:
        """The offset after the last one the lake took of `partition` (None: none yet)."""
        ends = [f.next for f in self.files if f.partition == partition]
        if partition in self.reached:
            ends.append(self.reached[partition])
        return max(ends) if ends else None

    def add(self, file: LakeFile) -> None:
        """Name `file`, which must start at or after the partition's end."""
        end = self.end(file.partition)
        if end is not None and file.first < end:
            raise ValueError(
                f"lake file {file.name} starts at {file.first}, inside what the lake "
                f"holds of partition {file.partition} (up to {end})"
            )
        self.files.append(file)
        self.files.sort(key=lambda f: (f.partition, f.first))
        self.reached[file.partition] = max(self.reached.get(file.partition, 0), file.next)

    def replace(self, old: list[LakeFile], new: LakeFile, now_ms: int) -> None:
        """Put `new` in place of `old` (consecutive files of one partition it covers)."""
        self._retire(old, now_ms)
        self.files.append(new)
        self.files.sort(key=lambda f: (f.partition, f.first))

    def retire_below(self, partition: int, offset: int, now_ms: int) -> list[LakeFile]:
        """Stop naming the files of `partition` that hold only offsets below `offset`
        (retention deleted them from the log); returns them."""
        return self._retire(
            [f for f in self.files if f.partition == partition and f.next <= offset], now_ms
        )

    def retire_older(self, horizon_ms: int, now_ms: int) -> list[LakeFile]:
        """Stop naming the files whose every row is older than `horizon_ms`; returns them."""
        return self._retire([f for f in self.files if f.max_timestamp_ms < horizon_ms], now_ms)

    def _retire(self, gone: list[LakeFile], now_ms: int) -> list[LakeFile]:
        """Stop naming `gone`, to be deleted once `now_ms` is old enough; returns them."""
        names = {f.name for f in gone}
        if names:
            self.files = [f for f in self.files if f.name not in names]
            self.retired.extend(Retired(name, now_ms) for name in sorted(names))
        return gone

    def due_for_deletion(self, now_ms: int, grace_ms: int) -> list[str]:
        """Retired files old enough to delete; forgets them."""
        due = [r.name for r in self.retired if now_ms - r.at_ms >= grace_ms]
        self.retired = [r for r in self.retired if now_ms - r.at_ms < grace_ms]
        return due

    def names(self) -> set[str]:
        """Every file the manifest knows, named or retired."""
        return {f.name for f in self.files} | {r.name for r in self.retired}


_decoder = msgspec.json.Decoder(Manifest)


def decode(raw: bytes | None) -> Manifest:
    """The stored manifest (an empty one when there is none yet)."""
    if raw is None:
        return Manifest()
    return _decoder.decode(raw)


def encode(manifest: Manifest) -> bytes:
    return msgspec.json.encode(manifest)
