"""The object store as Brook uses it: a handful of operations with clear outcomes.

A thin shell over obstore (Rust's object_store; chosen over boto3 for its lower
cost per request and memory, see docs/ARCHITECTURE.md). Every outcome the
storage layer must tell apart gets its own answer: a create refused because
the object exists (`Exists`), a conditional replace refused because the object
changed (`Changed`), a missing object (None), and any other failure
(StorageError). Requests are counted for the cost metrics.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import obstore
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import S3Store

from brook.errors import Fenced, StorageError

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig


class Exists(Exception):
    """A create was refused: the object is already there."""


class Changed(Exception):
    """A conditional replace was refused: the object is not the version we knew."""


class MissingObject(StorageError):
    """An object the catalog pointed at is gone: merged away meanwhile, or lost."""


def fenced(what: str) -> Fenced:
    return Fenced(
        f"{what}: another broker has taken over this bucket prefix; this one must stop writing"
    )


class RequestCounts:
    """Requests made and bytes moved, by kind: what an S3 bill is made of."""

    KINDS = ("put", "get", "list", "delete")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = dict.fromkeys(self.KINDS, 0)
        self.bytes_sent = 0
        self.bytes_received = 0

    def add(self, kind: str, sent: int = 0, received: int = 0) -> None:
        with self._lock:
            self.requests[kind] += 1
            self.bytes_sent += sent
            self.bytes_received += received


def split_url(url: str) -> tuple[str, str]:
    """("bucket", "prefix") of "s3://bucket/prefix"; StorageError when it is not one."""
    if not url.startswith("s3://"):
        raise StorageError(f"not an s3:// URL: {url!r}")
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not bucket:
        raise StorageError(f"the URL {url!r} names no bucket (s3://bucket/prefix)")
    return bucket, prefix.strip("/")


CREDENTIALS_HELP = (
    "no AWS credentials were found here: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
    "AWS_SESSION_TOKEN for temporary ones) or AWS_PROFILE in this process's environment (on "
    "Spark executors: spark.executorEnv.AWS_ACCESS_KEY_ID and so on), or run it where an "
    "instance role provides them"
)
_METADATA_ADDRESS = "169.254.169.254"
"""Where the store client asks for credentials when none are configured (an instance role)."""


_ACCESS_CODES = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403 Forbidden")


def _failure(action: str, key: str, exc: Exception, where: str = "") -> StorageError:
    """One line saying what failed and, for the usual mistakes (no credentials, a
    bucket that does not exist, a key that may not use it), what to do; `where` names
    the bucket and endpoint."""
    text = str(exc).strip()
    first_line = text.splitlines()[0] if text else type(exc).__name__
    if _METADATA_ADDRESS in first_line:
        return StorageError(f"S3 {action} of {key} failed: {CREDENTIALS_HELP} ({first_line})")
    if "NoSuchBucket" in text:
        return StorageError(
            f"{where or 'the bucket'} does not exist: create it, or check --storage, "
            "--endpoint-url and --region (BROOK_STORAGE, BROOK_ENDPOINT_URL, BROOK_REGION)"
        )
    if any(code in text for code in _ACCESS_CODES):
        return StorageError(
            f"S3 {action} of {key} in {where or 'the bucket'} was refused (access denied): "
            "check the credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
            "AWS_PROFILE) and that they may read and write the bucket"
        )
    return StorageError(f"S3 {action} of {key} failed: {first_line}")


class Bucket:
    """One bucket and prefix; keys below are relative to the prefix."""

    def __init__(
        self,
        url: str,
        endpoint_url: str | None = None,
        region: str | None = None,
        request_timeout_s: float = 30.0,
        retries_max: int = 3,
    ) -> None:
        self.url = url
        bucket, prefix = split_url(url)
        client: ClientConfig = {
            "timeout": timedelta(seconds=request_timeout_s),
            "connect_timeout": timedelta(seconds=5),
        }
        if endpoint_url is not None and endpoint_url.startswith("http://"):
            client["allow_http"] = True
        retry: RetryConfig = {
            "max_retries": retries_max,
            "retry_timeout": timedelta(seconds=request_timeout_s),
            "backoff": {
                "init_backoff": timedelta(milliseconds=100),
                "max_backoff": timedelta(seconds=2),
                "base": 2,
            },
        }
        options: dict[str, Any] = {}
        if endpoint_url is not None:
            options["endpoint"] = endpoint_url
        if region is not None:
            options["region"] = region
        try:
            self._store = S3Store(
                bucket,
                prefix=prefix or None,
                client_options=client,
                retry_config=retry,
                **options,
            )
        except Exception as exc:
            raise StorageError(f"cannot use {url}: {exc}") from None
        self.counts = RequestCounts()
        self.where = f"bucket {bucket} at {endpoint_url or 'AWS S3'}" + (
            f" ({region})" if region else ""
        )

    def _failure(self, action: str, key: str, exc: Exception) -> StorageError:
        return _failure(action, key, exc, self.where)

    def create(self, key: str, data: bytes | memoryview) -> str:
        """Store a new object; returns its ETag. Raises Exists or StorageError."""
        self.counts.add("put", sent=len(data))
        try:
            return str(obstore.put(self._store, key, data, mode="create")["e_tag"])
        except AlreadyExistsError:
            raise Exists(key) from None
        except Exception as exc:
            raise self._failure("create", key, exc) from None

    def put(self, key: str, data: bytes) -> None:
        """Store or overwrite an object unconditionally (only for hints). Raises StorageError."""
        self.counts.add("put", sent=len(data))
        try:
            obstore.put(self._store, key, data)
        except Exception as exc:
            raise self._failure("write", key, exc) from None

    def replace(self, key: str, data: bytes, etag: str) -> str:
        """Replace the object if it still has `etag`; returns the new ETag.
        Raises Changed or StorageError."""
        self.counts.add("put", sent=len(data))
        try:
            return str(obstore.put(self._store, key, data, mode={"e_tag": etag})["e_tag"])
        except PreconditionError:
            raise Changed(key) from None
        except Exception as exc:
            raise self._failure("replace", key, exc) from None

    def get(self, key: str) -> tuple[bytes, str] | None:
        """The object's bytes and ETag, or None when it does not exist."""
        try:
            result = obstore.get(self._store, key)
            data = bytes(result.bytes())
        except FileNotFoundError:
            self.counts.add("get")
            return None
        except Exception as exc:
            self.counts.add("get")
            raise self._failure("read", key, exc) from None
        self.counts.add("get", received=len(data))
        return data, str(result.meta["e_tag"])

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object (one ranged GET). Raises MissingObject or
        StorageError."""
        if end <= start:
            return b""
        try:
            data = bytes(obstore.get_range(self._store, key, start=start, end=end))
        except FileNotFoundError:
            self.counts.add("get")
            raise MissingObject(f"{self.url}: object {key} is missing") from None
        except Exception as exc:
            self.counts.add("get")
            raise self._failure("read", key, exc) from None
        self.counts.add("get", received=len(data))
        return data

    def stored_at(self, key: str) -> float:
        """When the store says it stored the object (its clock, whole seconds), in
        seconds since the epoch (one HEAD). For `brook doctor`'s clock check."""
        self.counts.add("get")
        try:
            meta = obstore.head(self._store, key)
        except Exception as exc:
            raise self._failure("HEAD", key, exc) from None
        return float(meta["last_modified"].timestamp())

    def list(self, prefix: str) -> list[tuple[str, int]]:
        """(key, size) of every object under `prefix`, sorted by key."""
        self.counts.add("list")
        try:
            found = [
                (str(meta["path"]), int(meta["size"]))
                for page in obstore.list(self._store, prefix)
                for meta in page
            ]
        except Exception as exc:
            raise self._failure("listing", prefix, exc) from None
        return sorted(found)

    def list_slice(self, prefix: str, first: str, last: str) -> builtins.list[tuple[str, int]]:
        """(key, size) of the objects under `prefix` from key `first` through the keys
        starting with `last`, sorted: one slice of a listing cut so that its pages are
        read side by side (S3 pages one listing 1,000 keys at a time, one after another)."""
        found: builtins.list[tuple[str, int]] = []
        try:
            for page in obstore.list(self._store, prefix, offset=first[:-1], chunk_size=1000):
                for meta in page:
                    key = str(meta["path"])
                    if key > last and not key.startswith(last):
                        return found
                    if key >= first:
                        found.append((key, int(meta["size"])))
        except Exception as exc:
            raise self._failure("listing", prefix, exc) from None
        finally:
            self.counts.add("list")
            for _ in range(len(found) // 1000):
                self.counts.add("list")
        return found

    def delete(self, key: str) -> None:
        """Remove the object; a missing one is not an error."""
        self.delete_many([key])

    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove objects, up to 1,000 per request; missing ones are not an error."""
        for start in range(0, len(keys), 1000):
            some = keys[start : start + 1000]
            self.counts.add("delete")
            try:
                obstore.delete(self._store, some if len(some) > 1 else some[0])
            except FileNotFoundError:
                continue
            except Exception as exc:
                raise self._failure("delete", some[0], exc) from None
