"""Reading the records a queue group leases: by position, with the last batches
read kept per partition.

A group leases a batch's records a hundred or so at a time, so reading each
lease's records afresh would fetch and checksum the same stored batch again and
again. The reader keeps the whole batches it read last for each partition
(their checksums verified once) and decodes only the records wanted from them.
Stored batches never change in place (a rewrite makes a new file), so what was
read stays true to what was written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from brook import limits
from brook.codec import decode_records, parse_header
from brook.log.partition import PartitionLog
from brook.records import Record

READ_AHEAD_RECORDS = 2_000
"""About how many records one storage read fetches (whole batches)."""


class _Batches(NamedTuple):
    first: int
    """The base offset of the first batch held."""
    end: int
    """The offset after the last record held."""
    raw: bytes


class RecordReader:
    def __init__(self, topic: str, logs: Callable[[], list[PartitionLog]]) -> None:
        self.topic = topic
        self._logs = logs
        self._held: dict[int, _Batches] = {}

    def records(self, positions: list[tuple[int, int]]) -> list[Record]:
        """The records at `positions` (sorted); records no longer stored are left out.
        Raises CorruptData."""
        logs = self._logs()
        found: list[Record] = []
        i = 0
        while i < len(positions):
            p, offset = positions[i]
            held = self._held.get(p)
            if held is None or not held.first <= offset < held.end:
                raw, end = logs[p].read_batches(offset, READ_AHEAD_RECORDS, limits.read_bytes_max)
                if not raw:
                    i += 1  # gone (retention) or not there
                    continue
                header = parse_header(raw, 0)
                assert not isinstance(header, str), "read_batches returns whole, verified batches"
                held = self._held[p] = _Batches(header.base_offset, end, raw)
            j = i
            while j < len(positions) and positions[j][0] == p and positions[j][1] < held.end:
                j += 1
            if j == i:
                i += 1  # in a gap (compaction): not stored
                continue
            found.extend(self._decode(p, held, [o for _, o in positions[i:j]]))
            i = j
        return found

    def _decode(self, partition: int, held: _Batches, offsets: list[int]) -> list[Record]:
        """The records at `offsets` (sorted, inside `held`), decoding only from the
        first wanted to the last wanted of each batch."""
        raw, k = held.raw, 0
        out: list[Record] = []
        pos = 0
        while pos < len(raw) and k < len(offsets):
            header = parse_header(raw, pos)
            assert not isinstance(header, str)
            stop = header.base_offset + header.record_count
            if offsets[k] < stop:
                last = k
                while last + 1 < len(offsets) and offsets[last + 1] < stop:
                    last += 1
                start = offsets[k]
                got, _ = decode_records(
                    raw,
                    pos,
                    header,
                    self.topic,
                    partition,
                    start,
                    limit=offsets[last] - start + 1,
                )
                wanted = set(offsets[k : last + 1])
                out.extend(r for r in got if r.offset in wanted)
                k = last + 1
            pos += header.length
        return out
