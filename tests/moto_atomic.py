"""moto's S3 server with its conditional PUTs made atomic, as S3's are.

S3 decides a conditional write (If-None-Match, If-Match) atomically: of two
PUTs racing for one key, one wins and the other gets 412. moto checks the
condition and stores the object in separate steps, so two racing PUTs can
both be answered 200 — a store Brook's fences cannot work on, as GUARANTEES
says. The tests run moto with every object PUT under one lock, so they test
Brook against the store it is made for. Run as `python -m tests.moto_atomic`
with moto.server's arguments.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from moto.s3.responses import S3Response
from moto.server import main

_puts = threading.Lock()
_put_object = S3Response.put_object


def _atomic_put_object(self: S3Response) -> Any:
    with _puts:
        return _put_object(self)


S3Response.put_object = _atomic_put_object  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
