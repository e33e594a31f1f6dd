"""Public files on S3: plain objects at `<prefix>/<name>`, outside Brook's catalog,
so any S3 client (pyarrow, DuckDB, Polars, Spark with s3a) finds them by name.

They are not fenced by the catalog, so they are written so that no fenced broker
can spoil them: a data file is created with If-None-Match under a name never used
before (at worst a fenced broker leaves an unnamed file behind), and a commit file
is replaced with If-Match on the version its writer read. A broker that takes a
prefix over claims each commit file before relying on it (brook/lake/service.py),
so the one it fenced can no longer replace it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from brook.errors import StorageError
from brook.storage import Superseded
from brook.storage.s3.objects import Bucket, Changed, Exists


class S3PublicFiles:
    def __init__(self, bucket: Bucket, epoch: Callable[[], int | None]) -> None:
        self._bucket = bucket
        self._epoch = epoch

    @property
    def epoch(self) -> int | None:
        return self._epoch()

    def url(self, name: str) -> str:
        return f"{self._bucket.url.rstrip('/')}/{name}"

    def create(self, name: str, data: bytes) -> None:
        try:
            self._bucket.create(name, data)
        except Exists:
            if not self._holds(name, data):
                raise StorageError(
                    f"{self.url(name)} already holds bytes this broker did not write"
                ) from None

    def read(self, name: str) -> tuple[bytes, str] | None:
        return self._bucket.get(name)

    def replace(self, name: str, data: bytes, version: str | None) -> str:
        try:
            if version is None:
                return self._bucket.create(name, data)
            return self._bucket.replace(name, data, version)
        except (Exists, Changed):
            # A retried PUT whose first try landed is refused by its own condition.
            found = self._bucket.get(name)
            if found is not None and found[0] == data:
                return found[1]
            raise Superseded(name) from None

    def _holds(self, name: str, data: bytes) -> bool:
        found = self._bucket.get(name)
        return found is not None and found[0] == data

    def list(self, prefix: str) -> list[str]:
        return [key for key, _ in self._bucket.list(prefix)]

    def delete(self, names: Sequence[str]) -> None:
        self._bucket.delete_many(list(names))

    def delete_prefix(self, prefix: str) -> None:
        self._bucket.delete_many(self.list(prefix))
