"""Every error Brook raises on purpose, each carrying the HTTP status it maps to.

    BrookError                      500  base class; raised as itself only for a bug (internal)
    ├── BadRequest                  400  malformed input (offsets, settings, record fields)
    │   └── InvalidName             400  topic or group name outside [A-Za-z0-9._-]{1,200}
    ├── Unauthorized                401
    ├── Forbidden                   403
    ├── NotFound                    404
    │   ├── TopicNotFound           404
    │   ├── PartitionNotFound       404
    │   ├── TimerNotFound           404  no timer by that id is known
    │   ├── GroupNotFound           404  no queue group by that name on the topic
    │   ├── EndpointNotFound        404  no delivery endpoint by that name
    │   └── JoinNotFound            404  no join by that id (never made, or ended long ago)
    ├── MethodNotAllowed            405  the path exists, the method does not
    ├── RequestTimeout              408  headers or body sent too slowly; the connection closes
    ├── Conflict                    409
    │   ├── TimerNotCancellable     409  the timer fired or was cancelled already
    │   ├── NotStaged               409  a publish names chunks that are not staged
    │   ├── LeaseExpired            409
    │   ├── Locked                  409  another broker owns this storage location
    │   ├── Fenced                  409  a newer writer took over this storage location
    │   ├── ReadOnly                409  a write on a broker opened with read_only=True
    │   └── IncompatibleFormat      409  the storage was written in a format this Brook cannot read
    ├── DataLoss                    410  records a reader asked for are no longer stored (retention)
    ├── RecordTooLarge              413
    ├── UriTooLong                  414  a request target over url_bytes_max; the connection closes
    ├── HeadersTooLarge             431  headers over headers_bytes_max or headers_count_max; closes
    ├── UnsupportedMediaType        415  a body whose content-type the route does not take
    ├── StorageError                503  the write was not made durable; nothing was acknowledged
    │   ├── CorruptData             503  stored bytes failed their checksum; never served as data
    │   ├── Unavailable             503  the client could not reach the server (or got no answer)
    │   └── Overloaded              503  too many bytes wait already; try again soon (Retry-After)
    └── Closed                      503  the broker was closed

Expected operating errors live here. Bugs are assertions, not BrookErrors.
"""

from __future__ import annotations

from typing import Any


class BrookError(Exception):
    """Base of every error Brook raises on purpose."""

    status = 500
    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(BrookError):
    status = 400
    code = "bad_request"


class InvalidName(BadRequest):
    code = "invalid_name"


class Unauthorized(BrookError):
    status = 401
    code = "unauthorized"


class Forbidden(BrookError):
    status = 403
    code = "forbidden"


class NotFound(BrookError):
    status = 404
    code = "not_found"


class TopicNotFound(NotFound):
    code = "topic_not_found"


class PartitionNotFound(NotFound):
    code = "partition_not_found"


class TimerNotFound(NotFound):
    code = "timer_not_found"


class GroupNotFound(NotFound):
    code = "group_not_found"


class EndpointNotFound(NotFound):
    code = "endpoint_not_found"


class ScheduleNotFound(NotFound):
    code = "schedule_not_found"


class JoinNotFound(NotFound):
    code = "join_not_found"


class MessageNotFound(NotFound):
    code = "message_not_found"


class EventTypeNotFound(NotFound):
    code = "event_type_not_found"


class MethodNotAllowed(BrookError):
    status = 405
    code = "method_not_allowed"

    def __init__(self, message: str, allowed: str = "") -> None:
        super().__init__(message)
        self.allowed = allowed
        """The methods the path takes, as its `Allow` header says them (RFC 9110 §15.5.6)."""


class RequestTimeout(BrookError):
    """The client sent a request's headers or body too slowly (header_timeout_s,
    body_timeout_s); the connection is closed."""

    status = 408
    code = "request_timeout"


class Conflict(BrookError):
    status = 409
    code = "conflict"


class NotStaged(Conflict):
    """A publish names staged chunks that are not stored (never staged, or dropped)."""

    code = "not_staged"


class TimerNotCancellable(Conflict):
    """The timer is known but no longer pending: it fired, or was cancelled already."""

    code = "timer_not_cancellable"


class LeaseExpired(Conflict):
    code = "lease_expired"


class Locked(Conflict):
    code = "locked"


class Fenced(Conflict):
    code = "fenced"


class ReadOnly(Conflict):
    code = "read_only"


class LakeOff(Conflict):
    """A lake sync asked of a broker that does not write the lake (no --lake)."""

    code = "lake_off"


class IncompatibleFormat(Conflict):
    """The storage location's format version is not one this Brook reads (brook/storage_format.py)."""

    code = "incompatible_format"


class DataLoss(BrookError):
    status = 410
    code = "data_loss"


class RecordTooLarge(BrookError):
    status = 413
    code = "record_too_large"


class UriTooLong(BrookError):
    status = 414
    code = "uri_too_long"


class HeadersTooLarge(BrookError):
    status = 431
    code = "headers_too_large"


class UnsupportedMediaType(BrookError):
    status = 415
    code = "unsupported_media_type"


class StorageError(BrookError):
    status = 503
    code = "storage_error"


class CorruptData(StorageError):
    code = "corrupt_data"


class Unavailable(StorageError):
    code = "unavailable"


class Overloaded(StorageError):
    """Back-pressure: the bytes waiting in memory are at their cap. Nothing of the
    request was kept; the same request succeeds once the backlog drains."""

    code = "overloaded"


class Closed(BrookError):
    status = 503
    code = "closed"


def from_code(code: str, message: str, status: int) -> BrookError:
    """The error a server reported, as its class (by code, else by status)."""
    by_code: dict[str, type[BrookError]] = {}
    by_status: dict[int, type[BrookError]] = {}
    pending: list[Any] = [BrookError]
    while pending:
        cls = pending.pop()
        by_code.setdefault(cls.code, cls)
        by_status.setdefault(cls.status, cls)
        pending.extend(cls.__subclasses__())
    cls = by_code.get(code) or by_status.get(status) or BrookError
    error = cls(message)
    return error
