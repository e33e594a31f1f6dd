"""The `brook` command line.

Every option can also come from a BROOK_* environment variable (for example
BROOK_DATA=/var/lib/brook).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import secrets
import ssl
import sys
from collections.abc import Callable
from typing import Any

import click
import uvloop

import brook
from brook import allocator, config, limits, logs
from brook import doctor as doctors
from brook.cli_errors import friendly
from brook.cli_spark import spark
from brook.errors import BrookError, Locked
from brook.server import app
from brook.server.http import HttpLimits
from brook.storage import location as locations
from brook.storage.s3.lease import lease_ms_default, lease_ms_min

data_option = click.option(
    "--data",
    default="./brook-data",
    show_default=True,
    envvar="BROOK_DATA",
    help="Directory holding the broker's data.",
)


def broker_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--data for an embedded broker, or --url (and --api-key) for a running `brook serve`."""
    fn = click.option("--api-key", default=None, envvar="BROOK_API_KEY", help="API key for --url.")(
        fn
    )
    fn = click.option(
        "--url",
        default=None,
        envvar="BROOK_URL",
        help="Talk to a running brook serve at this URL instead of opening --data.",
    )(fn)
    return data_option(fn)


def _connect(data: str, url: str | None, api_key: str | None, read_only: bool = False) -> Any:
    """The broker to talk to: remote when --url is given, else the directory (embedded);
    `read_only` for a command that only looks, so it works beside a running broker."""
    if url:
        return brook.connect(url, api_key=api_key)
    return _open(data, read_only=read_only)


def _open(data: str, **options: Any) -> brook.Broker:
    """The embedded broker on `data`; an s3:// URL takes BROOK_ENDPOINT_URL, BROOK_REGION
    and BROOK_CACHE_DIR from the environment unless given."""
    if locations.parse(data).kind == "s3":
        for name in ("endpoint_url", "region", "cache_dir"):
            value = os.environ.get(f"BROOK_{name.upper()}")
            if value and options.get(name) is None:
                options[name] = value
    try:
        return brook.open(data, **options)
    except Locked as exc:
        raise click.ClickException(
            f"{exc.message}; or give --url to go through that broker's API"
        ) from None


def plural(count: int, noun: str) -> str:
    """ "1 record", "2 records": counts for people."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def shown(value: Any) -> str:
    """A setting's value for people: none, on/off, or a backoff's parts, never a repr."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{name} {shown(part)}" for name, part in value.items())
    return str(value)


def _option_names(command: click.Command) -> set[str]:
    """Every option name of `command` and its subcommands: what brook.toml may set."""
    names = {p.name for p in command.params if isinstance(p, click.Option) and p.name}
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            names |= _option_names(sub)
    return names - {"config_path"}


def _defaults_for(command: click.Command, options: dict[str, Any]) -> dict[str, Any]:
    """click's default_map for `command` and its subcommands: the config file's options."""
    if isinstance(command, click.Group):
        return {name: _defaults_for(sub, options) for name, sub in command.commands.items()}
    return dict(options)


@click.group()
@click.version_option(brook.__version__, prog_name="brook")
@click.option(
    "--config",
    "config_path",
    default=None,
    envvar="BROOK_CONFIG",
    help=f"Config file (default: ./{config.DEFAULT_FILE} when present).",
)
@click.pass_context
def main(ctx: click.Context, config_path: str | None) -> None:
    """Brook: a durable event broker, job queue and timer service."""
    try:
        loaded = config.load(config_path)
        config.check_names(loaded, _option_names(main), config_path or config.DEFAULT_FILE)
    except BrookError as exc:
        if ctx.invoked_subcommand != "doctor":
            raise click.ClickException(exc.message) from None
        ctx.obj = DoctorsNote(exc.message)  # the doctor reports it, beside its other checks
        return
    ctx.obj = loaded
    ctx.default_map = _defaults_for(main, loaded.options)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def setting(name: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """An option of `brook serve`, also read from BROOK_<NAME> and brook.toml's `<name>`;
    --help shows its default and its environment variable."""
    envvar = "BROOK_" + name.lstrip("-").replace("-", "_").upper()
    kwargs.setdefault("show_default", not kwargs.get("is_flag", False))
    return click.option(name, envvar=envvar, show_envvar=True, **kwargs)


LOG_LEVELS = ("debug", "info", "warning", "error")


@main.command()
@setting("--data", default="./brook-data", help="Directory holding the broker's data.")
@setting(
    "--storage",
    default=None,
    help="Keep everything in object storage instead of --data: s3://bucket/prefix "
    "(credentials from the AWS_* environment variables).",
)
@setting("--host", default="127.0.0.1", help="Address to listen on.")
@setting(
    "--port", default=8080, type=click.IntRange(0, 65535), help="Port to listen on (0: any free)."
)
@setting(
    "--insecure", is_flag=True, help="Allow serving on a non-loopback address without API keys."
)
@setting("--tls-cert", default=None, help="Certificate (PEM) to serve HTTPS.")
@setting("--tls-key", default=None, help="Private key (PEM) of --tls-cert.")
@setting(
    "--request-bytes-max",
    default=limits.request_bytes_max,
    type=click.IntRange(1024),
    help="Largest request body; a larger one gets 413 as soon as its length is known.",
)
@setting(
    "--record-bytes-max",
    default=limits.record_bytes_max_default,
    type=click.IntRange(1, limits.record_bytes_max_ceiling),
    help="Largest record (value, key and headers); a larger one gets 413.",
)
@setting(
    "--inflight-bytes-max",
    default=limits.inflight_bytes_max_default,
    type=click.IntRange(1024),
    help="Request-body bytes held in memory across all connections; past it, 503 with Retry-After.",
)
@setting(
    "--connections-max",
    default=limits.connections_max_default,
    type=click.IntRange(1),
    help="Open connections; past it a new connection gets 503 and is closed.",
)
@setting(
    "--header-timeout-s",
    default=limits.header_timeout_s_default,
    type=click.FloatRange(0.1),
    help="A request's headers must arrive within this many seconds of its first byte (408).",
)
@setting(
    "--body-timeout-s",
    default=limits.body_timeout_s_default,
    type=click.FloatRange(0.1),
    help="A request's body must arrive within this many seconds of its headers (408).",
)
@setting(
    "--idle-timeout-s",
    default=limits.idle_timeout_s_default,
    type=click.FloatRange(0.1),
    help="A connection with no request in progress is closed after this many seconds.",
)
@setting(
    "--linger-ms",
    default=limits.linger_ms_default,
    type=click.FloatRange(0, 1000),
    help="Longest a batch waits for more records before it is written and synced.",
)
@setting(
    "--idempotency-window-ms",
    default=limits.idempotency_window_ms_default,
    type=click.IntRange(0),
    help="How long a record's idempotency_key is remembered: a repeat within it appends nothing.",
)
@setting(
    "--endpoint-url",
    default=None,
    help="S3-compatible endpoint for --storage (MinIO, R2, ...); AWS when not given.",
)
@setting("--region", default=None, help="Region for --storage.")
@setting(
    "--cache-dir",
    default="./brook-cache",
    help="Local read cache for --storage; may be lost at any time.",
)
@setting(
    "--cache-bytes",
    default=limits.cache_bytes_default,
    type=click.IntRange(0),
    help="Most disk space the read cache of --storage may use.",
)
@setting(
    "--take-over",
    is_flag=True,
    help="Take --storage over from a broker that still serves it (a rolling deploy): "
    "that broker is fenced and stops. Without it, a live owner makes this one refuse, "
    "and a crashed owner's lease is waited out.",
)
@setting(
    "--lease-ms",
    default=lease_ms_default,
    type=click.IntRange(lease_ms_min, 600_000),
    help="How long this broker's hold on --storage lasts unrenewed: how long a restart "
    "after a crash waits for it.",
)
@setting(
    "--open-files-max",
    default=None,
    type=click.IntRange(16),
    help="Most files of --data kept open at once (topics, queue groups); by default half "
    "the process's descriptor limit, which is first raised to its hard limit.",
)
@setting(
    "--delivery-allow-private-networks",
    is_flag=True,
    help="Let delivery endpoints be loopback, private or link-local addresses (local "
    "development only: anyone who may create endpoints could then reach them).",
)
@setting(
    "--log-level",
    default="info",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    help="Least severe log lines shown.",
)
@setting(
    "--access-log",
    is_flag=True,
    help="Log one line per request (method, path, status, time, bytes) at info.",
)
@click.pass_obj
@friendly
def serve(
    settings: config.Config | None,
    data: str,
    storage: str | None,
    host: str,
    port: int,
    insecure: bool,
    tls_cert: str | None,
    tls_key: str | None,
    request_bytes_max: int,
    record_bytes_max: int,
    inflight_bytes_max: int,
    connections_max: int,
    header_timeout_s: float,
    body_timeout_s: float,
    idle_timeout_s: float,
    linger_ms: float,
    idempotency_window_ms: int,
    endpoint_url: str | None,
    region: str | None,
    cache_dir: str,
    cache_bytes: int,
    take_over: bool,
    lease_ms: int,
    open_files_max: int | None,
    delivery_allow_private_networks: bool,
    log_level: str,
    access_log: bool,
) -> None:
    """Serve the HTTP API for the broker on --data (or --storage) until SIGTERM or Ctrl-C.

    Every option can also be set in brook.toml (its name with underscores) or in the
    environment variable shown beside it.
    """
    keys = settings.keys if settings is not None else []
    if not _is_loopback(host) and not keys and not insecure:
        raise click.ClickException(
            f"refusing to serve on {host} without API keys: anyone who can reach it could read and "
            "write every topic. Add keys (brook keys create), serve on 127.0.0.1, or pass --insecure."
        )
    tls = _tls_context(tls_cert, tls_key)
    logs.setup(log_level)
    allocator.give_back_large_buffers()  # this process is the broker's own
    common: dict[str, Any] = {
        "record_bytes_max": record_bytes_max,
        "linger_ms": linger_ms,
        "idempotency_window_ms": idempotency_window_ms,
        "delivery_allow_private_networks": delivery_allow_private_networks,
    }
    if storage is not None:
        where = storage
        broker = _open(
            storage,
            **common,
            endpoint_url=endpoint_url,
            region=region,
            cache_dir=cache_dir,
            cache_bytes=cache_bytes,
            take_over=take_over,
            wait_for_lease=True,
            lease_ms=lease_ms,
        )
    else:
        if take_over:
            raise click.ClickException(
                "--take-over applies to --storage s3://...: a directory is locked while its "
                "broker runs; stop that broker first"
            )
        where = os.path.abspath(data)
        broker = _open(data, **common, open_files_max=open_files_max)
    http_limits = HttpLimits(
        request_bytes_max=request_bytes_max,
        inflight_bytes_max=inflight_bytes_max,
        header_timeout_s=header_timeout_s,
        body_timeout_s=body_timeout_s,
        idle_timeout_s=idle_timeout_s,
        connections_max=connections_max,
    )
    server = app.Server(
        broker, host, port, keys, tls, http_limits, access_log=access_log, where=where
    )
    try:
        uvloop.run(app.serve(server, where))
    except app.CannotListen as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        with contextlib.suppress(BrookError):  # a fenced broker cannot finish its writes
            broker.close()
        brook.broker.log.info("stopped")
    fenced = getattr(broker.storage, "fenced", None)
    if fenced is not None and fenced.is_set():
        raise click.ClickException(
            "fenced: another broker took the storage over, so this one stopped"
        )


def _tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise click.ClickException("HTTPS needs both --tls-cert and --tls-key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise click.ClickException(f"cannot load the TLS certificate or key: {exc}") from None
    return context


@main.group()
def keys() -> None:
    """Create API keys."""


@keys.command("create")
@click.option("--name", required=True, help="A name for the key, shown in logs and errors.")
@click.option("--scopes", required=True, help="Comma-separated: produce, consume, admin.")
@click.option(
    "--topics",
    "topic_patterns",
    default="*",
    show_default=True,
    help="Comma-separated glob patterns.",
)
def keys_create(name: str, scopes: str, topic_patterns: str) -> None:
    """Print a new random key once, and the brook.toml stanza holding only its hash."""
    chosen = [s.strip() for s in scopes.split(",") if s.strip()]
    unknown = set(chosen) - set(config.SCOPES)
    if not chosen or unknown:
        raise click.ClickException(f"scopes must be some of {', '.join(config.SCOPES)}")
    patterns = [t.strip() for t in topic_patterns.split(",") if t.strip()]
    key = "brook_" + secrets.token_urlsafe(32)
    click.echo(f"key (shown once, store it now): {key}\n", err=True)
    click.echo(config.key_stanza(name, key, chosen, patterns))


@main.group()
def topics() -> None:
    """List, create, describe and delete topics."""


@topics.command("list")
@broker_options
@friendly
def topics_list(data: str, url: str | None, api_key: str | None) -> None:
    with _connect(data, url, api_key, read_only=True) as b:
        for info in b.topics():
            total = sum(info.end_offsets.values())
            click.echo(f"{info.name}\tpartitions={info.partitions}\trecords={total}")


@topics.command("create")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(1), default=1, show_default=True)
@click.option(
    "--retention-ms",
    type=click.IntRange(1),
    default=None,
    help="Drop records older than this (default: keep forever).",
)
@click.option(
    "--retention-bytes",
    type=click.IntRange(1),
    default=None,
    help="Drop the oldest records past this many bytes per partition (default: keep all).",
)
@broker_options
@friendly
def topics_create(
    name: str,
    partitions: int,
    retention_ms: int | None,
    retention_bytes: int | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    with _connect(data, url, api_key) as b:
        info = b.create_topic(
            name, partitions=partitions, retention_ms=retention_ms, retention_bytes=retention_bytes
        )
        click.echo(f"created {info.name} with {info.partitions} partitions")


@topics.command("describe")
@click.argument("name")
@broker_options
@friendly
def topics_describe(name: str, data: str, url: str | None, api_key: str | None) -> None:
    with _connect(data, url, api_key, read_only=True) as b:
        for info in b.topics():
            if info.name == name:
                click.echo(f"name: {info.name}\npartitions: {info.partitions}")
                keep = " (keep forever)"
                click.echo(
                    f"retention_ms: {shown(info.retention_ms)}"
                    f"{keep if info.retention_ms is None else ''}\n"
                    f"retention_bytes: {shown(info.retention_bytes)}"
                    f"{keep if info.retention_bytes is None else ''}\n"
                    f"compaction: {shown(info.compaction)}"
                )
                start = b.topic(name).start_offsets()
                for p, end in info.end_offsets.items():
                    held = f"offsets {start[p]}..{end - 1}" if end > start[p] else "empty"
                    click.echo(f"partition {p}: {held}, next offset {end}")
                return
        raise brook.errors.TopicNotFound(f"topic {name} does not exist")


@topics.command("delete")
@click.argument("name")
@broker_options
@friendly
def topics_delete(name: str, data: str, url: str | None, api_key: str | None) -> None:
    with _connect(data, url, api_key) as b:
        b.delete_topic(name)
        click.echo(f"deleted {name}")


@main.group()
def timers() -> None:
    """Schedule, cancel and show timers."""


def _at_ms(text: str) -> int:
    """--at as ms since the epoch, or an ISO 8601 time (UTC unless it says otherwise)."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither ms since the epoch nor an ISO 8601 time", param_hint="--at"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


@timers.command("schedule")
@click.argument("topic")
@click.argument("value")
@click.option(
    "--delay-ms", type=click.IntRange(0), default=None, help="Fire this many ms from now (0: now)."
)
@click.option("--at", "at", default=None, help="Fire at this time: ms since the epoch or ISO 8601.")
@click.option("--key", default=None, help="The record's key (UTF-8).")
@click.option("--id", "timer_id", default=None, help="The timer's id (default: a new one).")
@broker_options
@friendly
def timers_schedule(
    topic: str,
    value: str,
    delay_ms: int | None,
    at: str | None,
    key: str | None,
    timer_id: str | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Schedule VALUE to be appended to TOPIC later (--at or --delay-ms); prints its id."""
    if (at is None) == (delay_ms is None):
        raise click.UsageError(
            "give --at TIME (ms since the epoch or ISO 8601) or --delay-ms MS, exactly one"
        )
    due = None if at is None else _at_ms(at)
    with _connect(data, url, api_key) as b:
        click.echo(
            b.schedule(
                topic,
                value.encode(),
                at=due,
                delay_ms=delay_ms,
                key=None if key is None else key.encode(),
                timer_id=timer_id,
            )
        )


@timers.command("cancel")
@click.argument("timer_id")
@broker_options
@friendly
def timers_cancel(timer_id: str, data: str, url: str | None, api_key: str | None) -> None:
    """Cancel a pending timer (exit status 1 if it is not pending)."""
    with _connect(data, url, api_key) as b:
        if not b.cancel_timer(timer_id):
            raise click.ClickException(
                f"timer {timer_id} is not pending (fired, cancelled or unknown)"
            )
        click.echo(f"cancelled {timer_id}")


@timers.command("show")
@click.argument("timer_id")
@broker_options
@friendly
def timers_show(timer_id: str, data: str, url: str | None, api_key: str | None) -> None:
    """Print a timer's state: pending, fired (where) or cancelled."""
    with _connect(data, url, api_key, read_only=True) as b:
        info = b.timer(timer_id)
        if info is None:
            raise click.ClickException(f"timer {timer_id} is not known")
        due = datetime.datetime.fromtimestamp(info.due_ms / 1000, datetime.UTC).isoformat()
        click.echo(f"timer: {info.timer_id}\nstate: {info.state}\ntopic: {info.topic}\ndue: {due}")
        if info.state == "fired":
            click.echo(f"partition: {info.partition}\noffset: {info.offset}")


@main.group()
def queue() -> None:
    """Look into a queue group: counts, leases, dead records, redrive."""


@queue.command("stats")
@click.argument("topic")
@click.argument("group")
@broker_options
@friendly
def queue_stats(topic: str, group: str, data: str, url: str | None, api_key: str | None) -> None:
    """Print the group's settings and its records by state."""
    with _connect(data, url, api_key, read_only=True) as b:
        q = b.queue(topic, group, create=False)
        for name, value in q.stats().items():
            click.echo(f"{name}: {value}")
        for name, value in q.settings().items():
            click.echo(f"setting {name}: {shown(value)}")


@queue.command("lease")
@click.argument("topic")
@click.argument("group")
@click.option(
    "-n", "count", type=click.IntRange(1), default=10, show_default=True, help="Most records."
)
@click.option("--wait", type=float, default=0.0, show_default=True, help="Seconds to wait.")
@click.option(
    "--ack", "then_ack", is_flag=True, help="Ack what was leased (take it off the queue)."
)
@broker_options
@friendly
def queue_lease(
    topic: str,
    group: str,
    count: int,
    wait: float,
    then_ack: bool,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Lease up to N records and print them (partition, offset, attempt, receipt, value).

    Unless --ack is given they stay leased until their visibility timeout ends.
    """
    with _connect(data, url, api_key) as b:
        q = b.queue(topic, group)
        jobs = q.lease(max_records=count, timeout=wait)
        for job in jobs:
            r = job.record
            value = r.value.decode(errors="replace")
            click.echo(f"{r.partition}\t{r.offset}\tattempt={job.attempt}\t{job.receipt}\t{value}")
        if then_ack and jobs:
            q.ack(jobs)
            click.echo(f"acked {plural(len(jobs), 'record')}", err=True)


@queue.command("dead")
@click.argument("topic")
@click.argument("group")
@click.option("-n", "count", type=click.IntRange(1), default=None, help="Stop after N records.")
@broker_options
@friendly
def queue_dead(
    topic: str, group: str, count: int | None, data: str, url: str | None, api_key: str | None
) -> None:
    """Print the group's records in its dead-letter topic: origin, attempts, error, value.

    The dead-letter topic is a log: records redriven since still appear in it.
    """
    with _connect(data, url, api_key, read_only=True) as b:
        target = b.queue(topic, group, create=False).settings()["dead_letter_topic"]
        if target is None:
            click.echo(
                "this group keeps its dead records in place (see brook queue stats)", err=True
            )
            return
        if target not in {info.name for info in b.topics()}:
            click.echo(f"no dead records yet ({target} is empty)", err=True)
            return
        shown = 0
        for record in _read_all(b, target, None):
            headers = record.headers or {}
            if headers.get("brook.group", b"").decode() != group:
                continue
            if headers.get("brook.origin.topic", b"").decode() != topic:
                continue
            origin = (
                f"{headers['brook.origin.partition'].decode()}/"
                f"{headers['brook.origin.offset'].decode()}"
            )
            attempts = headers.get("brook.attempts", b"?").decode()
            error = headers.get("brook.error", b"").decode(errors="replace")
            value = record.value.decode(errors="replace")
            click.echo(f"{origin}\tattempts={attempts}\terror={error!r}\t{value}")
            shown += 1
            if count is not None and shown >= count:
                break


@queue.command("redrive")
@click.argument("topic")
@click.argument("group")
@click.option(
    "--limit", type=click.IntRange(1), default=None, help="Most records (default: all dead)."
)
@broker_options
@friendly
def queue_redrive(
    topic: str, group: str, limit: int | None, data: str, url: str | None, api_key: str | None
) -> None:
    """Put dead records back to work, their attempts counted afresh."""
    with _connect(data, url, api_key) as b:
        count = b.queue(topic, group, create=False).redrive(limit=limit)
        click.echo(f"redriven: {plural(count, 'record')}")


@main.group()
def endpoints() -> None:
    """Deliver topics' records to HTTP endpoints (webhooks)."""


def _show_endpoint(info: Any) -> None:
    state = "enabled" if info.enabled else f"disabled ({info.disabled_reason})"
    rate = "none" if info.rate_limit_per_s is None else f"{info.rate_limit_per_s}/s"
    click.echo(
        f"name: {info.name}\nurl: {info.url}\ntopics: {', '.join(info.topics)}\n"
        f"state: {state}\ntimeout_ms: {info.timeout_ms}\nmax_in_flight: {info.max_in_flight}\n"
        f"rate_limit_per_s: {rate}\nmax_attempts: {info.max_attempts}\n"
        f"backoff: {shown(info.backoff)}\nexpire_after_ms: {shown(info.expire_after_ms)}\n"
        f"ordering: {info.ordering}\nstart: {info.start}"
    )
    for name, value in info.headers.items():
        click.echo(f"header {name}: {value}")


def _headers(lines: tuple[str, ...]) -> dict[str, str] | None:
    if not lines:
        return None
    out = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise click.BadParameter(f"{line!r} is not 'Name: value'", param_hint="--header")
        out[name.strip()] = value.strip()
    return out


@endpoints.command("create")
@click.argument("name")
@click.argument("target", metavar="URL", required=False)
@click.option(
    "--topic", "topics", multiple=True, help="A topic or glob pattern (orders.*); repeat for more."
)
@click.option("--secret", default=None, help="Signing secret (whsec_...); made when not given.")
@click.option("--header", "header_lines", multiple=True, help="An extra header, 'Name: value'.")
@click.option("--timeout-ms", type=click.IntRange(100, 300_000), default=None)
@click.option("--max-in-flight", type=click.IntRange(1, 1024), default=None)
@click.option("--rate-limit-per-s", type=click.IntRange(1, 100_000), default=None)
@click.option("--max-attempts", type=click.IntRange(1), default=None)
@click.option("--expire-after-ms", type=click.IntRange(1), default=None)
@click.option("--ordering", type=click.Choice(["none", "key"]), default=None)
@click.option(
    "--start",
    type=click.Choice(["latest", "earliest"]),
    default=None,
    help="A new endpoint gets records appended from now on (latest, the default) or all.",
)
@broker_options
@friendly
def endpoints_create(
    name: str,
    target: str | None,
    topics: tuple[str, ...],
    secret: str | None,
    header_lines: tuple[str, ...],
    timeout_ms: int | None,
    max_in_flight: int | None,
    rate_limit_per_s: int | None,
    max_attempts: int | None,
    expire_after_ms: int | None,
    ordering: str | None,
    start: str | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Create endpoint NAME posting to URL the records of every --topic, or change the
    settings given. Prints the endpoint, and its secret once."""
    with _connect(data, url, api_key) as b:
        info = b.create_endpoint(
            name,
            target,
            list(topics) or None,
            secret=secret,
            headers=_headers(header_lines),
            timeout_ms=timeout_ms,
            max_in_flight=max_in_flight,
            rate_limit_per_s=rate_limit_per_s,
            max_attempts=max_attempts,
            expire_after_ms=expire_after_ms,
            ordering=ordering,
            start=start,
        )
        _show_endpoint(info)
        if info.secret is not None:
            click.echo(f"secret (shown once, store it now): {info.secret}")


@endpoints.command("list")
@broker_options
@friendly
def endpoints_list(data: str, url: str | None, api_key: str | None) -> None:
    """One line per endpoint: name, state, url, topics."""
    with _connect(data, url, api_key, read_only=True) as b:
        for info in b.endpoints():
            state = "enabled" if info.enabled else "disabled"
            click.echo(f"{info.name}\t{state}\t{info.url}\t{','.join(info.topics)}")


@endpoints.command("show")
@click.argument("name")
@broker_options
@friendly
def endpoints_show(name: str, data: str, url: str | None, api_key: str | None) -> None:
    """The endpoint's settings, and how delivery to it goes."""
    with _connect(data, url, api_key, read_only=True) as b:
        handle = b.endpoint(name)
        _show_endpoint(handle.info())
        s = handle.stats()
        rate = "-" if s.success_rate is None else f"{s.success_rate:.1%}"
        p50 = "-" if s.latency_p50_ms is None else f"{s.latency_p50_ms:.1f} ms"
        p99 = "-" if s.latency_p99_ms is None else f"{s.latency_p99_ms:.1f} ms"
        click.echo(
            f"ready: {s.ready}\nleased: {s.leased}\nretrying: {s.retrying}\nacked: {s.acked}\n"
            f"dead: {s.dead}\nin flight: {s.in_flight}\nbreaker: {s.breaker}\n"
            f"success rate: {rate}\nlatency p50: {p50}\nlatency p99: {p99}"
        )
        if s.last_error:
            click.echo(f"last error: {s.last_error}")


@endpoints.command("attempts")
@click.argument("name")
@click.argument("topic")
@click.argument("partition", type=click.IntRange(0))
@click.argument("offset", type=click.IntRange(0))
@broker_options
@friendly
def endpoints_attempts(
    name: str,
    topic: str,
    partition: int,
    offset: int,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Every attempt to deliver one record: status or error, latency, the answer's start."""
    with _connect(data, url, api_key, read_only=True) as b:
        found = b.endpoint(name).attempts(topic, partition, offset)
        if not found:
            click.echo("no attempts yet", err=True)
        for a in found:
            when = datetime.datetime.fromtimestamp(a.at_ms / 1000, datetime.UTC).isoformat()
            what = str(a.status) if a.status is not None else a.error
            excerpt = a.excerpt[:80].decode(errors="replace")
            click.echo(
                f"attempt {a.attempt}\t{when}\t{what}\t{a.latency_ms:.1f} ms\t{a.state}\t{excerpt}"
            )


@endpoints.command("redrive")
@click.argument("name")
@click.option("--topic", default=None, help="Only the dead records of this topic.")
@click.option("--limit", type=click.IntRange(1), default=None, help="Most records.")
@broker_options
@friendly
def endpoints_redrive(
    name: str, topic: str | None, limit: int | None, data: str, url: str | None, api_key: str | None
) -> None:
    """Put the endpoint's dead records back to work, their attempts counted afresh."""
    with _connect(data, url, api_key) as b:
        count = b.endpoint(name).redrive(topic=topic, limit=limit)
        click.echo(f"redriven: {plural(count, 'record')}")


def _endpoint_action(action: str, summary: str) -> None:
    @endpoints.command(action, help=summary)
    @click.argument("name")
    @broker_options
    @friendly
    def command(name: str, data: str, url: str | None, api_key: str | None) -> None:
        with _connect(data, url, api_key) as b:
            handle = b.endpoint(name)
            if action == "enable":
                handle.enable()
                click.echo(f"enabled {name}")
            elif action == "disable":
                handle.disable()
                click.echo(f"disabled {name}: its records wait until it is enabled")
            elif action == "delete":
                b.delete_endpoint(name)
                click.echo(f"deleted {name}")
            elif action == "rotate-secret":
                secret = handle.rotate_secret()
                click.echo(
                    f"secret (shown once, store it now; the old one signs too for a day): {secret}"
                )
            else:
                result = handle.test()
                what = str(result.status) if result.status is not None else result.error
                click.echo(
                    f"{what}\t{result.latency_ms:.1f} ms\t{result.excerpt[:200].decode(errors='replace')}"
                )
                if result.status is None or not 200 <= result.status < 300:
                    raise SystemExit(1)


_endpoint_action("enable", "Deliver again (after a 410 or a disable).")
_endpoint_action("disable", "Stop delivering; records wait in the endpoint's queue groups.")
_endpoint_action("test", "Send a signed test request now and print how it went.")
_endpoint_action("rotate-secret", "Make a new secret; the old one signs too for a day.")
_endpoint_action("delete", "Delete the endpoint: records not yet delivered never will be.")


@main.command()
@click.argument("topic")
@click.argument("value", required=False)
@click.option("--key", default=None, help="Key for every record (UTF-8).")
@broker_options
@friendly
def produce(
    topic: str, value: str | None, key: str | None, data: str, url: str | None, api_key: str | None
) -> None:
    """Append VALUE, or each line of standard input, to TOPIC."""
    with _connect(data, url, api_key) as b:
        t = b.topic(topic)
        key_bytes = key.encode() if key is not None else None
        if value is not None:
            ack = t.append(value.encode(), key=key_bytes)
            click.echo(f"partition={ack.partition} offset={ack.offset}")
            return
        lines = [brook.Record(line.rstrip("\n").encode(), key=key_bytes) for line in sys.stdin]
        for start in range(0, len(lines), 1000):
            t.append_many(lines[start : start + 1000])
        click.echo(f"appended {plural(len(lines), 'record')}", err=True)


@main.command()
@click.argument("topic")
@click.option("--group", default=None, help="Stream group; its position is committed.")
@click.option(
    "--from-beginning", is_flag=True, help="Without --group: print every retained record."
)
@click.option("-n", "count", type=click.IntRange(1), default=None, help="Stop after N records.")
@broker_options
@friendly
def consume(
    topic: str,
    group: str | None,
    from_beginning: bool,
    count: int | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Print records of TOPIC, one value per line, until none are left (or -n are printed).

    With --group, from the group's position, committing as it goes. Without, nothing is
    recorded anywhere: --from-beginning reads every partition from its oldest record.
    """
    if group is None and not from_beginning:
        raise click.UsageError(
            "say where to start: --group G (from the group's position, committing as it goes) "
            "or --from-beginning (every retained record, nothing recorded)"
        )
    if group is not None and from_beginning:
        raise click.UsageError("--from-beginning is for reading without a group; drop one of them")
    with _connect(data, url, api_key, read_only=group is None) as b:
        if group is None:
            for record in _read_all(b, topic, count):
                click.echo(record.value.decode(errors="replace"))
            return
        consumer = b.consumer(topic, group)
        printed = 0
        while count is None or printed < count:
            want = 500 if count is None else min(500, count - printed)
            polled = consumer.poll(max_records=want, timeout=0)
            if not polled:
                break
            for record in polled:
                click.echo(record.value.decode(errors="replace"))
            printed += len(polled)
            consumer.commit()


def _read_all(b: Any, topic: str, count: int | None) -> list[brook.Record]:
    t = b.topic(topic)
    out: list[brook.Record] = []
    for partition, start in sorted(t.start_offsets().items()):
        offset = start
        while count is None or len(out) < count:
            got = t.read(partition, offset, 1000 if count is None else min(1000, count - len(out)))
            if not got:
                break
            out.extend(got)
            offset = got[-1].offset + 1
    return out


@main.command()
@click.option("--topic", default="bench", show_default=True)
@click.option("--records", "count", default=100_000, show_default=True, type=click.IntRange(1))
@click.option(
    "--size",
    default=1024,
    show_default=True,
    type=click.IntRange(0, limits.record_bytes_max_default),
)
@click.option(
    "--batch",
    default=1,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Records per call.",
)
@click.option(
    "--producers", default=8, show_default=True, type=click.IntRange(1, 1024), help="Threads."
)
@broker_options
@friendly
def bench(
    topic: str,
    count: int,
    size: int,
    batch: int,
    producers: int,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Append records as fast as durability allows; report records/s and latency."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from brook import loadgen

    with (
        _connect(data, url, api_key) as b,
        Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            transient=True,
            console=None,
        ) as bar,
    ):
        task = bar.add_task(f"appending to {topic}", total=count)
        bucket = getattr(getattr(b, "storage", None), "bucket", None)
        before = dict(bucket.counts.requests) if bucket is not None else {}
        result = loadgen.run(
            b, topic, count, size, batch, producers, lambda n: bar.advance(task, n)
        )
        after = dict(bucket.counts.requests) if bucket is not None else {}
    click.echo(result.summary(size))
    if bucket is not None and result.records:
        used = {kind: after[kind] - before[kind] for kind in after}
        per_thousand = ", ".join(
            f"{kind.upper()} {count * 1000 / result.records:.1f}"
            for kind, count in used.items()
            if count
        )
        click.echo(f"object store requests per 1,000 records: {per_thousand}")


class DoctorsNote:
    """What `brook doctor` gets instead of the config when the config does not load."""

    def __init__(self, error: str) -> None:
        self.error = error


@main.command()
@setting("--data", default="./brook-data", help="Directory holding the broker's data.")
@setting("--storage", default=None, help="Check s3://bucket/prefix instead of --data.")
@setting("--endpoint-url", default=None, help="S3-compatible endpoint for --storage.")
@setting("--region", default=None, help="Region for --storage.")
@setting("--cache-dir", default="./brook-cache", help="Local read cache for --storage.")
@click.option("--url", default=None, help="Also ask a running broker's /v1/health.")
@click.pass_obj
def doctor(
    settings: config.Config | DoctorsNote | None,
    data: str,
    storage: str | None,
    endpoint_url: str | None,
    region: str | None,
    cache_dir: str,
    url: str | None,
) -> None:
    """Check this machine and storage for a broker: config and keys, storage reachable
    and writable, the lock or lease, clock skew against the object store, disk space.
    One line per check; exit status 1 when one fails."""
    path = click.get_current_context().find_root().params.get("config_path")
    shown_path = path or config.DEFAULT_FILE
    if isinstance(settings, DoctorsNote):
        checks = list(doctors.config_checks(None, settings.error, shown_path))
    else:
        checks = list(doctors.config_checks(settings, None, shown_path))
    if storage is not None:
        checks += doctors.s3_checks(storage, endpoint_url, region, cache_dir)
    else:
        checks += doctors.local_checks(data)
    if url is not None:
        checks.append(doctors.health_check(url))
    width = max(len(check.name) for check in checks)
    for check in checks:
        click.echo(f"{check.status:<4}  {check.name:<{width}}  {check.detail}")
    if any(check.status == "fail" for check in checks):
        raise SystemExit(1)


main.add_command(spark)


if __name__ == "__main__":
    main()
