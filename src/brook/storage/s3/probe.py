"""Does this object store honour conditional writes? Checked before taking ownership.

Single-writer safety on a bucket rests on two headers (SPEC §0): `If-None-Match: *`
on create (a chunk number, an object key, is taken once) and `If-Match` on the
manifest. A store that ignores them (some S3 look-alikes answer 200 to both) would
let a fenced broker overwrite its successor's acknowledged records, silently.
So a broker about to own a prefix tries both on an object of its own first, and
refuses a store that does not refuse what it must.
"""

from __future__ import annotations

import contextlib

from brook.errors import StorageError
from brook.storage.s3.objects import Bucket, Changed, Exists

PROBE_PREFIX = "probe/"
_NO_SUCH_ETAG = '"brook-probe-no-such-etag"'


def check_conditional_writes(bucket: Bucket, key: str) -> None:
    """Create, re-create and conditionally replace `key`, then delete it. Raises
    StorageError naming the missing feature when the store allows what it must refuse."""
    first = b"brook conditional write probe 1"
    try:
        bucket.create(key, first)
    except Exists:
        found = bucket.get(key)  # a retry of our own create that had landed
        if found is None or found[0] != first:
            raise StorageError(f"{bucket.url}: probe object {key} is not ours") from None
    try:
        try:
            bucket.create(key, b"brook conditional write probe 2")
        except Exists:
            pass
        else:
            raise _unsafe(bucket, "If-None-Match: * (it replaced an object that exists)")
        try:
            bucket.replace(key, b"brook conditional write probe 3", _NO_SUCH_ETAG)
        except Changed:
            pass
        else:
            raise _unsafe(bucket, "If-Match (it replaced an object whose ETag did not match)")
    finally:
        with contextlib.suppress(StorageError):
            bucket.delete(key)


def _unsafe(bucket: Bucket, feature: str) -> StorageError:
    return StorageError(
        f"{bucket.url}: this object store ignores {feature}; Brook needs conditional writes "
        "to keep one writer per prefix and cannot use it safely. Use a store that honours "
        "If-None-Match and If-Match on PUT (AWS S3, MinIO, Cloudflare R2, ...)."
    )
