"""Stored batches to Arrow record batches, a column at a time.

A Brook batch is already columnar (docs/FORMAT.md, "Record batch"): its value
and key columns are an offsets array and a blob, as in Arrow. So a window of
batches becomes one Arrow batch with a few numpy operations per stored batch
and one copy of the blobs, never a Python object per record. Only headers,
MessagePack maps, are decoded per record, and only in batches that have them.

Needs pyarrow and numpy (the `lake` or `spark` extra); the core never imports this: the
lake's writer and the Spark source do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec
import numpy as np
import pyarrow as pa

from brook.codec import BATCH_HEADER_BYTES, BatchHeader
from brook.codec.batch import COLUMN_FLAGS, FLAG_HEADERS, FLAG_KEYS
from brook.errors import CorruptData

HEADERS_TYPE = pa.map_(pa.string(), pa.binary())
SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", HEADERS_TYPE),
    ]
)
"""The columns of a topic read as a table; Spark's `topic string, partition int, offset
long, timestamp timestamp, key binary, value binary, headers map<string,binary>`."""
SPARK_SCHEMA = (
    "topic string, partition int, offset long, timestamp timestamp, "
    "key binary, value binary, headers map<string,binary>"
)

_decode_headers = msgspec.msgpack.Decoder(dict[str, bytes]).decode
_U32 = np.dtype("<u4")


class _Column:
    """A binary column being gathered from the batches of a window."""

    def __init__(self) -> None:
        self.blobs: list[memoryview] = []
        self.offsets: list[np.ndarray] = []
        self.valid: list[np.ndarray] = []
        self.size = 0

    def add(
        self, window: memoryview, blob_at: int, ends: np.ndarray, valid: np.ndarray | None
    ) -> None:
        """Items whose ends (relative to the blob at `blob_at`) are `ends` (n+1 entries)."""
        first, last = int(ends[0]), int(ends[-1])
        self.blobs.append(window[blob_at + first : blob_at + last])  # a view: copied once, below
        self.offsets.append(ends[:-1].astype(np.int64) + (self.size - first))
        self.size += last - first
        self.valid.append(np.ones(len(ends) - 1, np.bool_) if valid is None else valid)

    def add_missing(self, count: int) -> None:
        self.offsets.append(np.full(count, self.size, np.int64))
        self.valid.append(np.zeros(count, np.bool_))

    def array(self) -> pa.Array:
        if self.size >= 2**31:
            raise CorruptData("a window of batches holds more than 2 GiB in one column")
        offsets = np.concatenate([*self.offsets, [self.size]]).astype(np.int32)
        valid = np.concatenate(self.valid) if self.valid else np.ones(0, np.bool_)
        count = len(valid)
        nulls = count - int(np.count_nonzero(valid))
        bitmap = None if nulls == 0 else pa.py_buffer(np.packbits(valid, bitorder="little"))
        return pa.Array.from_buffers(
            pa.binary(),
            count,
            [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(self.blobs))],
            null_count=nulls,
        )


def _ends(window: bytes, at: int, count: int) -> np.ndarray:
    """An offsets column of `count` items at byte `at`, checked: from 0, never decreasing."""
    ends = np.frombuffer(window, _U32, count + 1, at)
    if ends[0] != 0 or np.any(ends[1:] < ends[:-1]):
        raise CorruptData("batch column offsets are not increasing")
    return ends


class _Layout(NamedTuple):
    """Where the columns of one stored batch lie in the window (docs/FORMAT.md)."""

    value_ends: np.ndarray
    column_ends: dict[int, np.ndarray]
    """Offsets of each optional column present, by its flag."""
    presence: np.ndarray | None
    """Which records have a key, when the batch has keys."""
    blob_at: dict[int, int]
    """Where each column's blob starts: 0 for values, else the column's flag."""


def _layout(window: bytes, pos: int, header: BatchHeader) -> _Layout:
    """The columns of a verified batch, checked to fill it exactly. Raises CorruptData."""
    count = header.record_count
    at = pos + BATCH_HEADER_BYTES
    value_ends = _ends(window, at, count)
    at += 4 * (count + 1)
    column_ends = {}
    for flag in COLUMN_FLAGS:
        if header.flags & flag:
            column_ends[flag] = _ends(window, at, count)
            at += 4 * (count + 1)
    presence = None
    if header.flags & FLAG_KEYS:
        presence = np.frombuffer(window, np.uint8, count, at) != 0
        at += count
    blob_at = {0: at}
    at += int(value_ends[-1])
    for flag, ends in column_ends.items():
        blob_at[flag] = at
        at += int(ends[-1])
    if at != pos + header.length:
        raise CorruptData(f"batch at offset {header.base_offset}: blobs do not fill it")
    return _Layout(value_ends, column_ends, presence, blob_at)


def to_arrow(
    window: bytes,
    batches: Sequence[tuple[int, BatchHeader]],
    topic: str,
    partition: int,
    start_offset: int,
    end_offset: int,
) -> pa.RecordBatch:
    """One Arrow batch (SCHEMA) of the records with offsets in [start_offset, end_offset)
    in `batches` (verified batches at their positions in `window`). Raises CorruptData."""
    view = memoryview(window)
    values, keys = _Column(), _Column()
    offsets: list[np.ndarray] = []
    stamps: list[np.ndarray] = []
    header_maps: list[list[list[tuple[str, bytes]]] | int] = []
    """Per batch: each record's header items, or how many records it has (with none)."""
    any_headers = False
    for pos, header in batches:
        skip = max(0, start_offset - header.base_offset)
        stop = min(header.record_count, end_offset - header.base_offset)
        if skip >= stop:
            continue
        layout = _layout(window, pos, header)
        values.add(view, layout.blob_at[0], layout.value_ends[skip : stop + 1], None)
        if layout.presence is not None:
            key_ends = layout.column_ends[FLAG_KEYS][skip : stop + 1]
            keys.add(view, layout.blob_at[FLAG_KEYS], key_ends, layout.presence[skip:stop])
        else:
            keys.add_missing(stop - skip)
        base = header.base_offset
        offsets.append(np.arange(base + skip, base + stop, dtype=np.int64))
        stamps.append(np.full(stop - skip, header.timestamp * 1000, np.int64))
        if header.flags & FLAG_HEADERS:
            any_headers = True
            ends, h0 = layout.column_ends[FLAG_HEADERS], layout.blob_at[FLAG_HEADERS]
            header_maps.append(
                [_header_items(window[h0 + ends[i] : h0 + ends[i + 1]]) for i in range(skip, stop)]
            )
        else:
            header_maps.append(stop - skip)
    count = sum(len(o) for o in offsets)
    return pa.RecordBatch.from_arrays(
        [
            _repeated(topic, count),
            pa.array(np.full(count, partition, np.int32)),
            pa.array(np.concatenate(offsets) if offsets else np.zeros(0, np.int64)),
            pa.array(np.concatenate(stamps) if stamps else np.zeros(0, np.int64), pa.int64()).view(
                pa.timestamp("us", tz="UTC")
            ),
            keys.array(),
            values.array(),
            _headers_array(header_maps, count, any_headers),
        ],
        schema=SCHEMA,
    )


def _repeated(text: str, count: int) -> pa.Array:
    """A string column of `count` copies of `text`, built from its buffers."""
    encoded = text.encode()
    ends = np.arange(count + 1, dtype=np.int32) * len(encoded)
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(ends), pa.py_buffer(encoded * count)]
    )


def _header_items(encoded: bytes) -> list[tuple[str, bytes]]:
    if not encoded:
        return []
    try:
        return list(_decode_headers(encoded).items())
    except msgspec.DecodeError as exc:
        raise CorruptData(f"batch headers do not decode: {exc}") from None


def _headers_array(
    header_maps: list[list[list[tuple[str, bytes]]] | int], count: int, any_headers: bool
) -> pa.Array:
    """The headers column: an empty map for every record without headers."""
    if not any_headers:
        return pa.MapArray.from_arrays(
            pa.array(np.zeros(count + 1, np.int32)),
            pa.array([], pa.string()),
            pa.array([], pa.binary()),
            type=HEADERS_TYPE,
        )
    flat: list[list[tuple[str, bytes]]] = []
    for part in header_maps:
        if isinstance(part, int):
            flat.extend([] for _ in range(part))
        else:
            flat.extend(part)
    return pa.array(flat, type=HEADERS_TYPE)
