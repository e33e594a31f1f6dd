"""The format version of a storage location: which Brook can read what it holds.

Every file Brook stores has a layout (docs/FORMAT.md); segments, durable marks
and the S3 manifest carry their own version numbers, but the JSON state files
(topic settings, group positions, queue settings, endpoints, timer checkpoints)
and the meaning of the names under the root do not. One number covers them all:
`format.json` at the root, `{"brook_format": N}`.

An owner writes it the first time it opens a location. A location without one
was written before the file existed, which is format 1, so an owner gives it
one and a reader takes it as 1: a rule, not a guess. A location whose format is
newer than this Brook's is refused, by owners and readers alike, with
IncompatibleFormat; nothing in it is read or changed. A later Brook that changes
a layout raises FORMAT and keeps reading every older format (or migrates it);
tests/upgrade holds a location written by every released format.
"""

from __future__ import annotations

import msgspec

from brook import layout
from brook.errors import IncompatibleFormat
from brook.storage import Storage

FORMAT = 2
"""The format this Brook writes; it reads this one and every one before it.
1: segments, marks and state files. 2: and a write-ahead log (`wal/`) whose entries
past its checkpoint are part of the records: a Brook that does not replay it must
not open the location."""


class FormatFile(msgspec.Struct, forbid_unknown_fields=False):
    brook_format: int


def check(storage: Storage, read_only: bool) -> int:
    """The location's format version, once checked readable; an owner writes it if absent."""
    raw = storage.read_all(layout.FORMAT)
    if raw is None:
        if not read_only:
            storage.write_atomic(layout.FORMAT, msgspec.json.encode(FormatFile(FORMAT)))
        return 1
    found = _decoded(raw)
    if found < FORMAT and not read_only:
        # Upgraded in place, before anything of the newer format is written: an older
        # Brook then refuses the location instead of missing what only this one reads.
        storage.write_atomic(layout.FORMAT, msgspec.json.encode(FormatFile(FORMAT)))
    return found


def _decoded(raw: bytes) -> int:
    """The format number in format.json's bytes, checked readable by this Brook."""
    try:
        found = msgspec.json.decode(raw, type=FormatFile).brook_format
    except msgspec.DecodeError:
        raise IncompatibleFormat(
            f"{layout.FORMAT} does not say which format the storage is in "
            f"({raw[:80]!r}); was it written by Brook?"
        ) from None
    if not 1 <= found <= FORMAT:
        raise IncompatibleFormat(
            f"the storage is in format {found}, written by a newer Brook; this Brook reads "
            f"formats 1 to {FORMAT}: upgrade it to open this storage"
        )
    return found
