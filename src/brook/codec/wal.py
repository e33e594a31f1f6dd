"""The write-ahead log's bytes: file headers and entries, pure in and out, no I/O.

A WAL file starts with a header naming its start *position* (a byte count over the
whole WAL, never reused), then holds entries back to back. An entry is a header, the
topic's name, and a body: the partition's batches exactly as the segment stores them
(each with its own CRC32C), or nothing for a topic dropped. The header's CRC32C covers
the header (its position included) and the name, so bytes left over from an older
generation of the file never pass for an entry. Layout in docs/FORMAT.md.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import crc32c

from brook.codec.batch import scan_batches

WAL_MAGIC = b"BROOKWAL"
WAL_VERSION = 1
ENTRY_KIND = b"WALE"

KIND_BATCHES = 1
"""The body holds a partition's batches, from offset `base` up to `next`."""
KIND_TOPIC_DROPPED = 2
"""The topic was deleted: entries before this one for it name records that are gone."""

_FILE_HEADER = struct.Struct("<8sHHQqI")
WAL_FILE_HEADER_BYTES = _FILE_HEADER.size  # 32
_ENTRY = struct.Struct("<4sIQIHBBIQQ")
ENTRY_HEADER_BYTES = _ENTRY.size  # 44
_CRC_START = 8  # the entry's checksum covers everything after the crc field


class FileHeader(NamedTuple):
    start: int
    """The position of the file's first byte in the whole WAL."""
    created_ms: int


class Entry(NamedTuple):
    position: int
    kind: int
    topic: str
    partition: int
    base: int
    next: int
    body: memoryview
    """The batches as stored (KIND_BATCHES), empty otherwise."""


def encode_file_header(start: int, created_ms: int) -> bytes:
    head = _FILE_HEADER.pack(WAL_MAGIC, WAL_VERSION, 0, start, created_ms, 0)
    return head[:-4] + struct.pack("<I", crc32c.crc32c(head[:-4]))


def decode_file_header(buf: bytes | memoryview) -> FileHeader | str:
    """The header, or why these bytes are not one."""
    if len(buf) < WAL_FILE_HEADER_BYTES:
        return "incomplete file header"
    magic, version, _, start, created_ms, crc = _FILE_HEADER.unpack_from(buf, 0)
    if magic != WAL_MAGIC:
        return f"not a write-ahead log file (magic {bytes(magic)!r})"
    if crc != crc32c.crc32c(bytes(buf[: WAL_FILE_HEADER_BYTES - 4])):
        return "file header checksum mismatch"
    if version != WAL_VERSION:
        return f"unsupported write-ahead log version {version}"
    return FileHeader(start, created_ms)


def encode_entry(
    position: int,
    kind: int,
    topic: str,
    partition: int,
    base: int,
    next_offset: int,
    body: Sequence[bytes | memoryview] = (),
) -> list[bytes | memoryview]:
    """An entry as parts to write (the body's parts are not copied)."""
    name = topic.encode()
    body_bytes = sum(map(len, body))
    head = _ENTRY.pack(
        ENTRY_KIND, 0, position, body_bytes, len(name), kind, 0, partition, base, next_offset
    )
    crc = crc32c.crc32c(name, crc32c.crc32c(head[_CRC_START:]))
    return [head[:4] + struct.pack("<I", crc) + head[_CRC_START:], name, *body]


def entry_bytes(topic: str, body_bytes: int) -> int:
    """How many bytes an entry takes (its position advances the WAL by this much)."""
    return ENTRY_HEADER_BYTES + len(topic.encode()) + body_bytes


class Scan(NamedTuple):
    entries: list[Entry]
    end: int
    """The position after the last valid entry."""
    problem: str | None
    """Why the scan stopped before the end of the bytes (None: at their end, or at
    the preallocated zeros after the last entry)."""


def scan_entries(buf: bytes | memoryview, at: int, position: int) -> Scan:
    """Valid entries of a WAL file's bytes from byte `at`, the first at `position`.

    Stops at the first entry that is torn, fails a checksum, names another position
    (bytes of an older use of the space), or whose body is not whole batches from its
    `base` to its `next` offset: what follows was never made durable, or is damage.
    """
    view = memoryview(buf)
    entries: list[Entry] = []
    problem: str | None = None
    for item in _walk(view, at, position):
        if isinstance(item, str):
            problem = item
            break
        entries.append(item)
        position = item.position + entry_bytes(item.topic, len(item.body))
    return Scan(entries, position, problem)


def _walk(view: memoryview, at: int, position: int) -> Iterator[Entry | str]:
    while at < len(view):
        if len(view) - at < ENTRY_HEADER_BYTES:
            if not any(view[at:]):
                return
            yield f"incomplete entry header at position {position}"
            return
        kind_tag, crc, found, body_bytes, name_bytes, kind, _, partition, base, nxt = (
            _ENTRY.unpack_from(view, at)
        )
        if kind_tag != ENTRY_KIND:
            if not any(view[at : at + ENTRY_HEADER_BYTES]):
                return  # the zeros after the last entry: the end
            yield f"not an entry at position {position}"
            return
        name_end = at + ENTRY_HEADER_BYTES + name_bytes
        if name_end > len(view):
            yield f"incomplete entry at position {position}"
            return
        expected = crc32c.crc32c(
            view[name_end - name_bytes : name_end],
            crc32c.crc32c(view[at + _CRC_START : at + ENTRY_HEADER_BYTES]),
        )
        if crc != expected or found != position:
            yield f"entry checksum or position mismatch at position {position}"
            return
        end = name_end + body_bytes
        if end > len(view):
            yield f"incomplete entry body at position {position}"
            return
        body = view[name_end:end]
        why = _body_problem(kind, body, base, nxt)
        if why is not None:
            yield f"{why} in the entry at position {position}"
            return
        try:
            topic = bytes(view[name_end - name_bytes : name_end]).decode()
        except UnicodeDecodeError:
            yield f"a topic name that is not UTF-8 at position {position}"
            return
        yield Entry(position, kind, topic, partition, base, nxt, body)
        position += end - at
        at = end


def _body_problem(kind: int, body: memoryview, base: int, nxt: int) -> str | None:
    """Why a body is not what its header says (None when it is)."""
    if kind == KIND_TOPIC_DROPPED:
        return None if not len(body) else "a body after a topic dropped"
    if kind != KIND_BATCHES:
        return f"unknown entry kind {kind}"
    expect = base
    for item in scan_batches(body, 0, base):
        if isinstance(item, str):
            return item
        expect = item[1].next_offset
    if expect != nxt or base >= nxt:
        return f"batches from {base} end at {expect}, not {nxt}"
    return None
