"""The settings of `brook serve`, declared once.

`ServeSettings` is the single source: each field's type, bounds (from limits.py),
default and help make the command's flag (`--record-bytes-max`), its environment
variable (`BROOK_RECORD_BYTES_MAX`) and its brook.toml key (`record_bytes_max`), and
each field says which part takes it (`role`): the broker, its storage, the HTTP
server or the serving process. Precedence, highest first: flags, BROOK_* variables,
brook.toml, the defaults here.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from brook import limits, names

Role = Literal["broker", "local", "s3", "http", "server"]


def _setting(help: str, role: Role, **bounds: Any) -> Meta:
    return Meta(description=help, extra={"role": role}, **bounds)


LogLevel = Literal["debug", "info", "warning", "error"]


class ServeSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Everything `brook serve` can be told."""

    data: Annotated[str, _setting("Directory holding the broker's data.", "local")] = "./brook-data"
    storage: Annotated[
        str | None,
        _setting(
            "Keep everything in object storage instead of --data: s3://bucket/prefix "
            "(credentials from the AWS_* environment variables).",
            "s3",
        ),
    ] = None
    host: Annotated[str, _setting("Address to listen on.", "server")] = "127.0.0.1"
    port: Annotated[int, _setting("Port to listen on (0: any free).", "server", ge=0, le=65535)] = (
        8080
    )
    insecure: Annotated[
        bool,
        _setting("Allow serving on a non-loopback address without API keys.", "server"),
    ] = False
    tls_cert: Annotated[str | None, _setting("Certificate (PEM) to serve HTTPS.", "server")] = None
    tls_key: Annotated[str | None, _setting("Private key (PEM) of --tls-cert.", "server")] = None
    request_bytes_max: Annotated[
        int,
        _setting(
            "Largest request body; a larger one gets 413 as soon as its length is known.",
            "http",
            ge=limits.request_bytes_min,
        ),
    ] = limits.request_bytes_max
    record_bytes_max: Annotated[
        int,
        _setting(
            "Largest record (value, key and headers); a larger one gets 413.",
            "broker",
            ge=1,
            le=limits.record_bytes_max_ceiling,
        ),
    ] = limits.record_bytes_max_default
    inflight_bytes_max: Annotated[
        int,
        _setting(
            "Request-body bytes held in memory across all connections; past it, 503 with "
            "Retry-After.",
            "http",
            ge=limits.request_bytes_min,
        ),
    ] = limits.inflight_bytes_max_default
    connections_max: Annotated[
        int,
        _setting(
            "Open connections; past it a new connection gets 503 and is closed.", "http", ge=1
        ),
    ] = limits.connections_max_default
    header_timeout_s: Annotated[
        float,
        _setting(
            "A request's headers must arrive within this many seconds of its first byte (408).",
            "http",
            ge=limits.http_timeout_s_min,
        ),
    ] = limits.header_timeout_s_default
    body_timeout_s: Annotated[
        float,
        _setting(
            "A request's body must arrive within this many seconds of its headers (408).",
            "http",
            ge=limits.http_timeout_s_min,
        ),
    ] = limits.body_timeout_s_default
    idle_timeout_s: Annotated[
        float,
        _setting(
            "A connection with no request in progress is closed after this many seconds.",
            "http",
            ge=limits.http_timeout_s_min,
        ),
    ] = limits.idle_timeout_s_default
    linger_ms: Annotated[
        float,
        _setting(
            "Longest a batch waits for more records before it is written and synced.",
            "broker",
            ge=0,
            le=limits.linger_ms_max,
        ),
    ] = limits.linger_ms_default
    checkpoint_interval_ms: Annotated[
        int,
        _setting(
            "Longest time between checkpoints, which make segments durable so the write-ahead "
            "log can let go of what they hold.",
            "broker",
            ge=limits.checkpoint_interval_ms_min,
            le=limits.checkpoint_interval_ms_max,
        ),
    ] = limits.checkpoint_interval_ms_default
    wal_bytes_max: Annotated[
        int,
        _setting(
            "Most write-ahead log past the last checkpoint before a round waits for one: the "
            "most a restart after a crash replays.",
            "broker",
            ge=limits.wal_bytes_max_min,
        ),
    ] = limits.wal_bytes_max_default
    queue_batches_bytes_max: Annotated[
        int,
        _setting(
            "Bytes of record batches the queue groups keep for each other once read (a record "
            "fanned out to many endpoints is read once); the most of the broker's memory that "
            "grows with traffic. Smaller on a small machine whose groups rarely share records.",
            "broker",
            ge=0,
            le=limits.queue_batches_bytes_max_ceiling,
        ),
    ] = limits.queue_batches_bytes_max_default
    idempotency_window_ms: Annotated[
        int,
        _setting(
            "How long a record's idempotency_key is remembered: a repeat within it appends "
            "nothing.",
            "broker",
            ge=0,
        ),
    ] = limits.idempotency_window_ms_default
    endpoint_url: Annotated[
        str | None,
        _setting(
            "S3-compatible endpoint for --storage (MinIO, R2, ...); AWS when not given.", "s3"
        ),
    ] = None
    region: Annotated[str | None, _setting("Region for --storage.", "s3")] = None
    cache_dir: Annotated[
        str, _setting("Local read cache for --storage; may be lost at any time.", "s3")
    ] = "./brook-cache"
    cache_bytes: Annotated[
        int, _setting("Most disk space the read cache of --storage may use.", "s3", ge=0)
    ] = limits.cache_bytes_default
    take_over: Annotated[
        bool,
        _setting(
            "Take --storage over from a broker that still serves it (a rolling deploy): "
            "that broker is fenced and stops. Without it, a live owner makes this one "
            "refuse, and a crashed owner's lease is waited out.",
            "s3",
        ),
    ] = False
    lease_ms: Annotated[
        int,
        _setting(
            "How long this broker's hold on --storage lasts unrenewed: how long a restart "
            "after a crash waits for it.",
            "s3",
            ge=limits.lease_ms_min,
            le=limits.lease_ms_max,
        ),
    ] = limits.lease_ms_default
    open_files_max: Annotated[
        Annotated[int, Meta(ge=limits.open_files_min)] | None,
        _setting(
            "Most files of --data kept open at once (topics, queue groups); by default half "
            "the process's descriptor limit, which is first raised to its hard limit.",
            "local",
        ),
    ] = None
    delivery_allow_private_networks: Annotated[
        bool,
        _setting(
            "Let delivery endpoints be loopback or private addresses, never cloud metadata "
            "ones (169.254.0.0/16 and the like): for local development, or narrowed by "
            "--delivery-allow-networks (anyone who may create endpoints could reach them).",
            "broker",
        ),
    ] = False
    delivery_allow_networks: Annotated[
        tuple[str, ...],
        _setting(
            "With --delivery-allow-private-networks: only loopback and private addresses "
            "inside these networks (CIDRs: 10.1.0.0/16, fd00::/8) may be endpoints, and a "
            "cloud metadata address only when one of them is exactly it "
            "(169.254.169.254/32); public addresses stay allowed. Give the flag once per "
            "network; in the variable, separate them by spaces; in brook.toml, a list.",
            "broker",
        ),
    ] = ()
    delivery_workers: Annotated[
        int,
        _setting(
            "Processes that send delivery attempts (sign, send, read the answer) beside the "
            "broker's own loop; 0: the broker's loop sends them (the faster on two cores).",
            "broker",
            ge=0,
            le=limits.delivery_workers_max,
        ),
    ] = 0
    metrics_endpoints: Annotated[
        tuple[Annotated[str, Meta(pattern=names.TOPIC_OR_GLOB_PATTERN)], ...],
        _setting(
            "Endpoints (names or glob patterns) that /metrics gives series of their own while "
            "healthy too; failing ones have them anyway, and every endpoint counts in the "
            "aggregates. Give the flag once per pattern; in the variable, separate them by "
            "spaces; in brook.toml, a list.",
            "broker",
        ),
    ] = ()
    lake: Annotated[
        bool,
        _setting(
            "Also write every topic as Parquet under the location's lake/ (needs pyarrow: "
            "pip install 'brook-broker[lake]'), for Spark and any Parquet reader.",
            "broker",
        ),
    ] = False
    lake_lag_ms: Annotated[
        int,
        _setting(
            "With --lake: how long an active segment's records may wait before they reach "
            "the lake (sealed segments go at once).",
            "broker",
            ge=0,
            le=limits.lake_lag_ms_max,
        ),
    ] = limits.lake_lag_ms_default
    log_level: Annotated[LogLevel, _setting("Least severe log lines shown.", "server")] = "info"
    access_log: Annotated[
        bool,
        _setting("Log one line per request (method, path, status, time, bytes) at info.", "server"),
    ] = False

    def of_role(self, role: Role) -> dict[str, Any]:
        """The settings one part takes, by name (the broker's keyword arguments, ...)."""
        return {field.name: getattr(self, field.name) for field in FIELDS if field.role == role}


class Field(msgspec.Struct, frozen=True):
    """One setting as the shells present it: flag, variable, type, bounds, help."""

    name: str
    kind: Literal["str", "int", "float", "bool", "choice", "list"]
    """`list`: of strings (a flag given once per item; a TOML list)."""
    default: Any
    help: str
    role: Role
    optional: bool = False
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def envvar(self) -> str:
        return "BROOK_" + self.name.upper()


def _fields() -> tuple[Field, ...]:
    out = []
    info = msgspec.inspect.type_info(ServeSettings)
    assert isinstance(info, msgspec.inspect.StructType)
    for field in info.fields:
        meta = field.type
        assert isinstance(meta, msgspec.inspect.Metadata), field.name
        kind: Any = meta.type
        optional = False
        if isinstance(kind, msgspec.inspect.UnionType):
            (kind,) = [t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType)]
            optional = True
        names: dict[type, str] = {
            msgspec.inspect.StrType: "str",
            msgspec.inspect.IntType: "int",
            msgspec.inspect.FloatType: "float",
            msgspec.inspect.BoolType: "bool",
            msgspec.inspect.LiteralType: "choice",
            msgspec.inspect.VarTupleType: "list",
        }
        out.append(
            Field(
                name=field.name,
                kind=names[type(kind)],  # type: ignore[arg-type]  # one of the Literal's
                default=field.default,
                help=(meta.extra_json_schema or {})["description"],
                role=(meta.extra or {})["role"],
                optional=optional,
                low=getattr(kind, "ge", None),
                high=getattr(kind, "le", None),
                choices=_literal_values(field.name) if names[type(kind)] == "choice" else (),
            )
        )
    return tuple(out)


def _literal_values(name: str) -> tuple[str, ...]:
    """A Literal setting's values in the order declared (msgspec sorts them)."""
    annotated = typing.get_type_hints(ServeSettings, include_extras=True)[name]
    return typing.get_args(typing.get_args(annotated)[0])


FIELDS = _fields()
"""Every setting of ServeSettings, in declaration order."""


def settings_from(values: dict[str, Any]) -> ServeSettings:
    """ServeSettings from values already parsed by type (flags, variables, brook.toml);
    a value out of bounds raises msgspec.ValidationError naming the setting."""
    return msgspec.convert(values, ServeSettings)


def shown(value: Any) -> str:
    """A setting's value for people (the CLI and the dashboard): none, on/off, a backoff's
    parts, whole floats as integers (1000, not 1000.0); never a repr."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{name} {shown(part)}" for name, part in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(shown(part) for part in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
