"""What a storage backend did since it opened, as one read model (StorageStats)."""

from __future__ import annotations

import shutil
from typing import Any

from brook.records import StorageStats


def storage_stats(storage: Any) -> StorageStats:
    """Requests and bytes of an object store (what it bills for), its cache, and the
    free space of the disk data lives on (the directory, or the object store's cache)."""
    bucket = getattr(storage, "bucket", None)
    cache = getattr(storage, "cache", None)
    root = getattr(storage, "root", None)
    folder = cache.folder if cache is not None else root
    return StorageStats(
        object_store=bucket is not None,
        requests=dict(bucket.counts.requests) if bucket is not None else {},
        bytes_sent=bucket.counts.bytes_sent if bucket is not None else 0,
        bytes_received=bucket.counts.bytes_received if bucket is not None else 0,
        cache_hits=cache.hits if cache is not None else None,
        cache_misses=cache.misses if cache is not None else None,
        cache_bytes=cache.size_bytes if cache is not None else None,
        disk_free_bytes=shutil.disk_usage(folder).free if folder is not None else None,
    )
