"""The write-ahead log's bytes (docs/FORMAT.md, "Write-ahead log"): entries read back as
written, and a scan that stops at the first byte that is not a whole, current entry."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.codec import encode_batch
from brook.codec.batch import Columns
from brook.codec.wal import (
    KIND_BATCHES,
    KIND_TOPIC_DROPPED,
    WAL_FILE_HEADER_BYTES,
    decode_file_header,
    encode_entry,
    encode_file_header,
    entry_bytes,
    scan_entries,
)

topics = st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True)
values = st.lists(st.binary(max_size=30), min_size=1, max_size=5)


def batches(base: int, groups: list[list[bytes]]) -> tuple[list[bytes], int]:
    """Batches of `groups` from offset `base`, as parts; and the offset after them."""
    parts: list[bytes] = []
    for group in groups:
        parts.extend(bytes(p) for p in encode_batch(base, 1_700_000_000_000, Columns(group)))
        base += len(group)
    return parts, base


entries_st = st.lists(
    st.tuples(topics, st.integers(0, 2**31), st.integers(0, 2**40), st.lists(values, max_size=3)),
    min_size=1,
    max_size=6,
)


def encoded(start: int, drawn: list) -> tuple[bytes, list[tuple]]:  # type: ignore[type-arg]
    """A WAL file starting at `start` holding the drawn entries; and what each says."""
    data = bytearray(encode_file_header(start, 5))
    position = start + len(data)
    said = []
    for topic, partition, base, groups in drawn:
        if groups:
            parts, nxt = batches(base, groups)
            entry = encode_entry(position, KIND_BATCHES, topic, partition, base, nxt, parts)
            said.append((position, KIND_BATCHES, topic, partition, base, nxt, b"".join(parts)))
        else:
            entry = encode_entry(position, KIND_TOPIC_DROPPED, topic, 0, 0, 0)
            said.append((position, KIND_TOPIC_DROPPED, topic, 0, 0, 0, b""))
        size = sum(map(len, entry))
        assert size == entry_bytes(topic, len(said[-1][6]))
        data += b"".join(bytes(p) for p in entry)
        position += size
    return bytes(data), said


@given(st.integers(0, 2**50), entries_st)
def test_entries_read_back_as_written(start: int, drawn: list) -> None:  # type: ignore[type-arg]
    data, said = encoded(start, drawn)
    assert decode_file_header(data) == (start, 5)
    scan = scan_entries(data, WAL_FILE_HEADER_BYTES, start + WAL_FILE_HEADER_BYTES)
    assert scan.problem is None
    assert [(*e[:6], bytes(e.body)) for e in scan.entries] == said
    assert scan.end == start + len(data)


@given(entries_st, st.data())
def test_a_torn_tail_keeps_the_whole_entries_before_it(drawn: list, data: st.DataObject) -> None:  # type: ignore[type-arg]
    full, said = encoded(0, drawn)
    cut = data.draw(st.integers(WAL_FILE_HEADER_BYTES, len(full) - 1))
    scan = scan_entries(full[:cut], WAL_FILE_HEADER_BYTES, WAL_FILE_HEADER_BYTES)
    kept = [e for e in said if e[0] + entry_bytes(e[2], len(e[6])) <= cut]
    assert [e.position for e in scan.entries] == [e[0] for e in kept]
    # Zeros after the cut (preallocated space) end the log the same way; they complete
    # an entry only where its missing bytes were zeros, and then it is that very entry.
    padded = full[:cut] + bytes(4096)
    again = scan_entries(padded, WAL_FILE_HEADER_BYTES, WAL_FILE_HEADER_BYTES)
    assert [e.position for e in again.entries][: len(kept)] == [e[0] for e in kept]
    assert all((*e[:6], bytes(e.body)) in said for e in again.entries), "an entry made up"


@given(entries_st, st.data())
def test_a_flipped_byte_is_never_read_as_an_entry(drawn: list, data: st.DataObject) -> None:  # type: ignore[type-arg]
    full, said = encoded(0, drawn)
    at = data.draw(st.integers(WAL_FILE_HEADER_BYTES, len(full) - 1))
    damaged = bytearray(full)
    damaged[at] ^= data.draw(st.integers(1, 255))
    scan = scan_entries(bytes(damaged), WAL_FILE_HEADER_BYTES, WAL_FILE_HEADER_BYTES)
    before = [e for e in said if e[0] + entry_bytes(e[2], len(e[6])) <= at]
    assert [e.position for e in scan.entries] == [e[0] for e in before]
    assert scan.problem is not None


def test_entries_from_an_older_use_of_the_space_are_not_read() -> None:
    """A file's bytes at a position are only an entry if the entry says that position."""
    old, _ = encoded(0, [("t", 0, 0, [[b"a"]])])
    shifted = scan_entries(old, WAL_FILE_HEADER_BYTES, 4096 + WAL_FILE_HEADER_BYTES)
    assert shifted.entries == []
    assert shifted.problem is not None and "position" in shifted.problem


def test_a_body_that_is_not_its_offsets_is_refused() -> None:
    parts, _ = batches(10, [[b"a", b"b"]])
    lying = encode_entry(WAL_FILE_HEADER_BYTES, KIND_BATCHES, "t", 0, 10, 13, parts)
    data = encode_file_header(0, 0) + b"".join(bytes(p) for p in lying)
    scan = scan_entries(data, WAL_FILE_HEADER_BYTES, WAL_FILE_HEADER_BYTES)
    assert scan.entries == [] and scan.problem is not None and "end at 12, not 13" in scan.problem


def test_a_damaged_file_header_says_why() -> None:
    header = bytearray(encode_file_header(7, 0))
    assert decode_file_header(bytes(header[:10])) == "incomplete file header"
    header[15] ^= 1
    assert decode_file_header(bytes(header)) == "file header checksum mismatch"
    assert "not a write-ahead log" in str(decode_file_header(b"X" * WAL_FILE_HEADER_BYTES))
