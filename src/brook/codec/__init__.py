"""Record batches and segment framing: pure bytes in, bytes out, no I/O.

The byte layout is specified in docs/FORMAT.md; keep the two in step.
"""

from brook.codec.batch import (
    BATCH_HEADER_BYTES,
    BatchHeader,
    decode_keys,
    decode_records,
    encode_batch,
    parse_header,
    scan_batches,
)
from brook.codec.segment import (
    SEGMENT_HEADER_BYTES,
    TRAILER_BYTES,
    IndexEntry,
    decode_seal,
    decode_segment_header,
    encode_seal,
    encode_segment_header,
    first_stamped_at,
)

__all__ = [
    "BATCH_HEADER_BYTES",
    "SEGMENT_HEADER_BYTES",
    "TRAILER_BYTES",
    "BatchHeader",
    "IndexEntry",
    "decode_keys",
    "decode_records",
    "decode_seal",
    "decode_segment_header",
    "encode_batch",
    "encode_seal",
    "encode_segment_header",
    "first_stamped_at",
    "parse_header",
    "scan_batches",
]
