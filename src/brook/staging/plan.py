"""Staged writes without I/O: names, the staged chunk format, the writer's state,
routing and the marker keys that let an interrupted publish resume exactly.

Kept pure so every rule here is tested without storage (tests/staging).
"""

from __future__ import annotations

import hashlib
import struct
from typing import Literal

import msgspec

from brook.codec.batch import Columns, read_client_batches
from brook.errors import BadRequest, CorruptData
from brook.partitioner import partition_for_key

_CHUNK_HEADER = struct.Struct("<4sHHi")
CHUNK_MAGIC = b"BSTG"
CHUNK_VERSION = 1
ANY_PARTITION = -1
"""In a chunk's header: the records go by key (unkeyed ones to one partition per chunk)."""


class WriterState(msgspec.Struct, forbid_unknown_fields=False):
    """What a writer last published (`staging/<topic>/<writer>/state.json`).

    Written with the intent before a publish appends anything (`publishing`,
    with the parts and each partition's end offset then), and again once every
    record is durable (`done`). A publish found `publishing` is resumed from it,
    never begun afresh.
    """

    seq: int
    phase: Literal["publishing", "done"]
    parts: dict[str, int]
    """Staged part -> how many chunks it holds."""
    starts: dict[str, int]
    """Partition -> its end offset before the publish appended anything."""
    records: int
    """Records published (when done)."""
    updated_ms: int


encode_state = msgspec.json.encode
_decode_state = msgspec.json.Decoder(WriterState).decode


def decode_state(raw: bytes, name: str) -> WriterState:
    try:
        return _decode_state(raw)
    except msgspec.DecodeError as exc:
        raise CorruptData(f"{name}: {exc}") from None


Decision = Literal["new", "resume", "done", "stale"]


def decide(state: WriterState | None, seq: int) -> Decision:
    """What a publish of `seq` must do, given what the writer published last:
    begin it (`new`), finish it (`resume`), or nothing: it was published
    (`done`), or a later one was, so this one was too or was given up (`stale`)."""
    if state is None or seq > state.seq:
        return "new"
    if seq < state.seq:
        return "stale"
    return "resume" if state.phase == "publishing" else "done"


# ---------------------------------------------------------------- chunks


def encode_chunk(batch: bytes, partition: int | None) -> bytes:
    """A staged chunk's file: a header naming the partition asked for, then the
    records as client batches (docs/FORMAT.md, "Staged writes")."""
    target = ANY_PARTITION if partition is None else partition
    return _CHUNK_HEADER.pack(CHUNK_MAGIC, CHUNK_VERSION, 0, target) + batch


def decode_chunk(raw: bytes, name: str) -> tuple[int | None, Columns]:
    """The partition asked for and the records of a staged chunk. Raises CorruptData."""
    if len(raw) < _CHUNK_HEADER.size:
        raise CorruptData(f"{name}: too short for a staged chunk")
    magic, version, _, target = _CHUNK_HEADER.unpack_from(raw)
    if magic != CHUNK_MAGIC or version != CHUNK_VERSION:
        raise CorruptData(f"{name}: not a staged chunk of version {CHUNK_VERSION}")
    columns = read_client_batches(raw[_CHUNK_HEADER.size :]).columns()
    return (None if target == ANY_PARTITION else target), columns


# ---------------------------------------------------------------- publishing


def marker(writer: str, seq: int, part: str, chunk: int, partition: int) -> bytes:
    """The idempotency key on the last record of one chunk's records in one partition.

    A chunk's records for a partition are appended in one write, so once its
    last record is durable all of them are; a resumed publish skips a piece
    whose marker it finds past the partition's start.
    """
    text = f"{writer}\0{seq}\0{part}\0{chunk}\0{partition}".encode()
    return b"brook-staged:" + hashlib.blake2b(text, digest_size=16).digest()


def route(
    columns: Columns, partitions: int, partition: int | None, seed: bytes
) -> list[tuple[int, list[int]]]:
    """(partition, indexes of its records) for one chunk, the same on every publish:
    an asked-for partition takes them all; otherwise by key, and the unkeyed ones
    to one partition chosen from `seed` (never round-robin, which a resume would
    not repeat). Raises BadRequest for a partition the topic lacks."""
    count = len(columns)
    if partition is not None:
        if partition >= partitions:
            raise BadRequest(f"the topic has {partitions} partitions; there is no {partition}")
        return [(partition, list(range(count)))]
    unkeyed = int.from_bytes(hashlib.blake2b(seed, digest_size=8).digest(), "little") % partitions
    if columns.keys is None or partitions == 1:
        return [(unkeyed, list(range(count)))]
    by_partition: dict[int, list[int]] = {}
    for i, key in enumerate(columns.keys):
        p = unkeyed if key is None else partition_for_key(key, partitions)
        by_partition.setdefault(p, []).append(i)
    return sorted(by_partition.items())


def piece(columns: Columns, indexes: list[int], key: bytes) -> Columns:
    """The records at `indexes`, the last one carrying the marker `key`."""
    picked = columns if len(indexes) == len(columns) else columns.select(indexes)
    if picked is columns:
        picked = Columns(columns.values, columns.keys, columns.headers, None, columns.bytes)
    if not picked.bytes:
        picked.bytes = sum(map(len, picked.values))
    picked.idempotency = [None] * (len(picked) - 1) + [key]
    return picked
