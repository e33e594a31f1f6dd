"""The manifest: the one mutable object of a bucket prefix. Pure: no I/O.

It holds the writer epoch and the catalog of every file the broker keeps,
so start-up reads one object instead of listing the bucket. A file is one of:

- inline: small files (topic settings, group positions) live in the manifest
  itself, so replacing one costs a single PUT;
- object: an immutable object holding the whole file (larger files, such as
  compacted segments);
- chunks: an appendable file (the active segment), stored as numbered chunk
  objects under a prefix of its own, one per sync. Chunks are not listed in
  the manifest, so appending never rewrites it; they are listed once when
  the file is opened.

Every change is a conditional replace (If-Match on the ETag this broker last
saw), so a broker that another one has taken over fails its next change.
The manifest also holds the owner's lease (lease.py), renewed by every change.
Layout: docs/FORMAT.md, "Object storage".
"""

from __future__ import annotations

import msgspec

from brook.storage.s3.lease import Lease

MANIFEST_KEY = "manifest.json"
MANIFEST_VERSION = 1


class Run(msgspec.Struct, frozen=True, array_like=True):
    """Chunks of an appendable file merged into one object: the first `chunks` not
    merged before, `size` bytes. A run of one chunk is that chunk itself."""

    key: str
    chunks: int
    size: int


class Entry(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """Where one file's bytes are: exactly one of `data`, `key`, `chunks`.

    An appendable file (`chunks`) starts with its `runs`, in order, and goes on
    with the chunks numbered from the sum of the runs' chunk counts.
    """

    data: bytes | None = None
    key: str | None = None
    chunks: str | None = None
    size: int = 0
    runs: tuple[Run, ...] = ()
    void: tuple[int, ...] = ()
    """Chunk numbers given up after a PUT with no answer: read as empty."""

    @property
    def merged_chunks(self) -> int:
        return sum(run.chunks for run in self.runs)

    @property
    def merged_bytes(self) -> int:
        return sum(run.size for run in self.runs)


class Manifest(msgspec.Struct, forbid_unknown_fields=True):
    version: int = MANIFEST_VERSION
    epoch: int = 0
    """Bumped by every broker that takes the prefix over; names its new objects."""
    files: dict[str, Entry] = msgspec.field(default_factory=dict)
    lease: Lease | None = None
    """The owner's lease (lease.py); None in a manifest no broker has owned since leases."""


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Manifest).decode


def encode(manifest: Manifest) -> bytes:
    return _encode(manifest)


def decode(raw: bytes) -> Manifest:
    """The manifest in `raw`; ValueError when it is not one this version can read."""
    try:
        manifest = _decode(raw)
    except msgspec.DecodeError as exc:
        raise ValueError(f"the manifest does not decode: {exc}") from None
    if manifest.version != MANIFEST_VERSION:
        raise ValueError(f"unsupported manifest version {manifest.version}")
    return manifest


def copy(manifest: Manifest) -> Manifest:
    """A copy to change and write; the original stays what the bucket holds."""
    return Manifest(manifest.version, manifest.epoch, dict(manifest.files), manifest.lease)


CHUNKS = "chunks"
"""The folder of every appendable file's chunk objects: `chunks/<epoch>-<n>/<seq>`."""


def chunk_key(prefix: str, seq: int) -> str:
    return f"{prefix}{seq:010d}"


def chunk_seq(key: str) -> int:
    return int(key.rsplit("/", 1)[1])
