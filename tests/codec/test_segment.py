from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.codec import (
    SEGMENT_HEADER_BYTES,
    IndexEntry,
    decode_seal,
    decode_segment_header,
    encode_seal,
    encode_segment_header,
)
from brook.codec.segment import seal_position

u63 = st.integers(0, 2**63 - 1)
entries = st.lists(
    st.builds(IndexEntry, u63, st.integers(SEGMENT_HEADER_BYTES, 2**40), u63), max_size=50
)


@given(st.integers(0, 2**32 - 1), u63, u63)
def test_segment_header_round_trip(partition: int, base: int, created: int) -> None:
    head = encode_segment_header(partition, base, created)
    assert len(head) == SEGMENT_HEADER_BYTES
    assert decode_segment_header(head) == (partition, base, created)


def test_segment_header_rejects_damage() -> None:
    head = bytearray(encode_segment_header(1, 2, 3))
    assert isinstance(decode_segment_header(bytes(head[:-1])), str)
    head[20] ^= 1
    assert decode_segment_header(bytes(head)) == "segment header checksum mismatch"
    assert isinstance(decode_segment_header(b"NOTBROOK" + bytes(28)), str)


@given(entries, u63, st.integers(SEGMENT_HEADER_BYTES, 10_000))
def test_seal_round_trip(items: list[IndexEntry], next_offset: int, index_position: int) -> None:
    seal = encode_seal(items, next_offset, index_position)
    file_bytes = index_position + len(seal)
    assert seal_position(seal[-16:], file_bytes) == index_position
    assert decode_seal(seal, file_bytes) == (items, next_offset, index_position)


@given(entries)
def test_a_torn_or_damaged_seal_is_not_a_seal(items: list[IndexEntry]) -> None:
    seal = encode_seal(items, 7, 100)
    for cut in range(len(seal)):
        assert decode_seal(seal[:cut], 100 + cut) is None
    for byte in range(len(seal) - 16):
        damaged = bytearray(seal)
        damaged[byte] ^= 0x10
        assert decode_seal(bytes(damaged), 100 + len(seal)) is None
