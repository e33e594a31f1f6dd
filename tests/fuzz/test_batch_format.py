"""The batch format under hypothesis: round trips, truncations, bit flips."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brook.codec import decode_records, encode_batch, parse_header, scan_batches
from brook.codec.batch import BatchHeader, decode_columns, read_client_batches, verify
from brook.records import Record

names = st.text(min_size=0, max_size=8)
records = st.builds(
    Record,
    value=st.binary(max_size=64),
    key=st.none() | st.binary(max_size=16),
    headers=st.none() | st.dictionaries(names, st.binary(max_size=8), min_size=1, max_size=3),
)
batches = st.tuples(
    st.integers(0, 2**63 - 2**21),
    st.integers(0, 2**62),
    st.lists(records, min_size=1, max_size=20),
).flatmap(
    lambda t: st.tuples(
        st.just(t[0]),
        st.just(t[1]),
        st.just(t[2]),
        st.none()
        | st.lists(
            st.none() | st.binary(min_size=1, max_size=12), min_size=len(t[2]), max_size=len(t[2])
        ),
    )
)


def read_whole(buf: bytes) -> tuple[BatchHeader, list[Record], list[bytes | None] | None] | None:
    """The batch at the start of buf if it is whole and intact, else None."""
    header = parse_header(buf, 0)
    if isinstance(header, str) or not verify(buf, 0, header):
        return None
    got, keys = decode_records(buf, 0, header, "t", 3, want_idempotency=True)
    return header, got, keys


@given(batches)
def test_round_trip(batch: tuple[int, int, list[Record], list[bytes | None] | None]) -> None:
    base, timestamp, recs, idem = batch
    buf = b"".join(encode_batch(base, timestamp, recs, idem))
    decoded = read_whole(buf)
    assert decoded is not None
    header, got, keys = decoded
    assert (
        header.base_offset == base
        and header.record_count == len(recs)
        and header.length == len(buf)
    )
    for i, (want, have) in enumerate(zip(recs, got, strict=True)):
        assert (have.value, have.key, have.headers) == (want.value, want.key, want.headers or None)
        assert (have.topic, have.partition, have.offset, have.timestamp) == (
            "t",
            3,
            base + i,
            timestamp,
        )
    assert keys == (idem if idem is not None else [None] * len(recs))


@given(batches)
def test_columns_round_trip(
    batch: tuple[int, int, list[Record], list[bytes | None] | None],
) -> None:
    """A client's batch decodes to the columns it was encoded from, ready to append as is."""
    base, timestamp, recs, idem = batch
    buf = b"".join(encode_batch(base, timestamp, recs, idem))
    header = parse_header(buf, 0)
    assert not isinstance(header, str)
    columns = decode_columns(buf, 0, header)
    assert columns.values == [r.value for r in recs]
    assert (columns.keys or [None] * len(recs)) == [r.key for r in recs]
    assert (columns.headers or [None] * len(recs)) == [r.headers or None for r in recs]
    assert (columns.idempotency or [None] * len(recs)) == (idem or [None] * len(recs))
    again = b"".join(encode_batch(base, timestamp, columns))
    assert again == buf, "re-encoding the decoded columns gives the same bytes"


@given(st.lists(batches, min_size=1, max_size=4), st.integers(0, 2**40), st.integers(0, 2**40))
def test_client_batches_are_appended_as_they_are(
    sent: list[tuple[int, int, list[Record], list[bytes | None] | None]], base: int, timestamp: int
) -> None:
    """A client's batches, restamped, read back as the records sent, at the broker's offsets."""
    body = b"".join(b"".join(encode_batch(b, t, recs, idem)) for b, t, recs, idem in sent)
    client = read_client_batches(body)
    records = [r for _, _, recs, _ in sent for r in recs]
    assert len(client) == len(records)
    assert client.bytes == sum(len(r.value) + len(r.key or b"") for r in records)
    plain = all(not r.headers for r in records) and all(
        idem is None or idem.count(None) == len(idem) for *_, idem in sent
    )
    assert client.plain == plain
    assert client.columns().values == [r.value for r in records]
    if not client.plain:
        return
    written = b"".join(b"".join(parts) for _, parts in client.encode(base, timestamp))
    got: list[Record] = []
    for item in scan_batches(written, 0, base):
        assert not isinstance(item, str), item
        position, header = item
        got.extend(decode_records(written, position, header, "t", 0)[0])
    assert [(r.value, r.key) for r in got] == [(r.value, r.key) for r in records]
    assert [r.offset for r in got] == list(range(base, base + len(records)))
    assert {r.timestamp for r in got} == {timestamp}


@given(batches, st.data())
def test_decoding_from_an_offset_inside_the_batch(batch, data) -> None:  # type: ignore[no-untyped-def]
    base, timestamp, recs, idem = batch
    buf = b"".join(encode_batch(base, timestamp, recs, idem))
    header = parse_header(buf, 0)
    assert not isinstance(header, str)
    start = data.draw(st.integers(base, base + len(recs)))
    got, keys = decode_records(buf, 0, header, "t", 0, start, want_idempotency=True)
    assert [r.offset for r in got] == list(range(start, base + len(recs)))
    assert [r.value for r in got] == [r.value for r in recs[start - base :]]
    assert keys is not None and len(keys) == len(got)


@settings(max_examples=25)
@given(batches)
def test_every_truncation_is_rejected(batch) -> None:  # type: ignore[no-untyped-def]
    base, timestamp, recs, idem = batch
    buf = b"".join(encode_batch(base, timestamp, recs, idem))
    for cut in range(len(buf)):
        assert read_whole(buf[:cut]) is None, (
            f"a batch cut to {cut} of {len(buf)} bytes was accepted"
        )


@settings(max_examples=15)
@given(batches)
def test_every_bit_flip_is_rejected(batch) -> None:  # type: ignore[no-untyped-def]
    base, timestamp, recs, idem = batch
    buf = bytearray(b"".join(encode_batch(base, timestamp, recs, idem)))
    for bit in range(len(buf) * 8):
        buf[bit // 8] ^= 1 << (bit % 8)
        assert read_whole(bytes(buf)) is None, f"bit {bit} flipped was accepted"
        buf[bit // 8] ^= 1 << (bit % 8)
    assert read_whole(bytes(buf)) is not None
