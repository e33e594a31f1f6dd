"""The headers a join puts on the record it appends (brook/joins), read by the task
layer to pass the members' results on. Pure: no imports above the leaf modules.

    brook.join           the join whose continuation (or on_error record) this is
    brook.join.results   the members' outcomes, in member order (msgpack, below)
    brook.join.pass      how a task takes them (its creator's word): "one" (the first
                         member's result as the first argument: a chain's link),
                         "list" (all of them as a list: a chord's callback) or "none"
    brook.join.error     on an on_error record: the failed member's error (UTF-8)
    brook.join.failed    on an on_error record: the failed member's record, topic/p/o
"""

from __future__ import annotations

import msgspec

JOIN = "brook.join"
RESULTS = "brook.join.results"
PASS = "brook.join.pass"
ERROR = "brook.join.error"
FAILED = "brook.join.failed"
PASSING = ("one", "list", "none")

Outcome = tuple[bool, bytes, str]
"""(ok, data, ref): data is the result an ack carried (b"" for none), or the error
(UTF-8); ref the member's record, topic/partition/offset."""

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[tuple[bool, bytes, str]])


def encode_results(outcomes: list[Outcome]) -> bytes:
    return _encoder.encode(outcomes)


def decode_results(raw: bytes) -> list[Outcome]:
    """The members' outcomes a continuation carries; ValueError if unreadable."""
    try:
        return _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise ValueError(f"header {RESULTS} is not a list of outcomes: {exc}") from None
