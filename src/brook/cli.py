"""The `brook` command line.

Every option can also come from a BROOK_* environment variable (for example
BROOK_DATA=/var/lib/brook).
"""

from __future__ import annotations

import ipaddress
import sys
import threading
from collections.abc import Callable
from typing import Any

import click
import uvloop

import brook
from brook import limits, logs
from brook.errors import BrookError, Locked
from brook.server import app

data_option = click.option(
    "--data",
    default="./brook-data",
    show_default=True,
    envvar="BROOK_DATA",
    help="Directory holding the broker's data.",
)


def _open(data: str) -> brook.Broker:
    try:
        return brook.open(data)
    except Locked as exc:
        raise click.ClickException(f"{exc.message}; stop that broker or use its API") from None


def _friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn Brook's errors into one clear line and a non-zero exit, never a traceback."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrookError as exc:
            raise click.ClickException(f"{exc.code}: {exc.message}") from None

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


@click.group()
@click.version_option(brook.__version__, prog_name="brook")
def main() -> None:
    """Brook: a durable event broker, job queue and timer service."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@main.command()
@data_option
@click.option("--host", default="127.0.0.1", show_default=True, envvar="BROOK_HOST")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), envvar="BROOK_PORT"
)
@click.option(
    "--insecure",
    is_flag=True,
    envvar="BROOK_INSECURE",
    help="Allow serving on a non-loopback address without API keys.",
)
@click.option(
    "--request-bytes-max",
    default=limits.request_bytes_max,
    show_default=True,
    type=click.IntRange(1024),
    envvar="BROOK_REQUEST_BYTES_MAX",
    help="Largest request body; larger requests get 413.",
)
@click.option("--log-level", default="info", envvar="BROOK_LOG_LEVEL", show_default=True)
@_friendly
def serve(
    data: str, host: str, port: int, insecure: bool, request_bytes_max: int, log_level: str
) -> None:
    """Serve the HTTP API for the broker on DATA until SIGTERM or Ctrl-C."""
    if not _is_loopback(host) and not insecure:
        raise click.ClickException(
            f"refusing to serve on {host} without API keys: anyone who can reach it could read and write "
            "every topic. Serve on 127.0.0.1, or pass --insecure to do it anyway."
        )
    logs.setup(log_level)
    broker = _open(data)
    try:
        uvloop.run(app.serve(broker, host, port, request_bytes_max))
    finally:
        broker.close()
        brook.broker.log.info("stopped")


@main.group()
def topics() -> None:
    """List, create, describe and delete topics."""


@topics.command("list")
@data_option
@_friendly
def topics_list(data: str) -> None:
    with _open(data) as b:
        for info in b.topics():
            total = sum(info.end_offsets.values())
            click.echo(f"{info.name}\tpartitions={info.partitions}\trecords={total}")


@topics.command("create")
@click.argument("name")
@click.option("--partitions", type=int, default=1, show_default=True)
@click.option("--retention-ms", type=int, default=None)
@click.option("--retention-bytes", type=int, default=None)
@data_option
@_friendly
def topics_create(
    name: str, partitions: int, retention_ms: int | None, retention_bytes: int | None, data: str
) -> None:
    with _open(data) as b:
        info = b.create_topic(
            name, partitions=partitions, retention_ms=retention_ms, retention_bytes=retention_bytes
        )
        click.echo(f"created {info.name} with {info.partitions} partitions")


@topics.command("describe")
@click.argument("name")
@data_option
@_friendly
def topics_describe(name: str, data: str) -> None:
    with _open(data) as b:
        for info in b.topics():
            if info.name == name:
                click.echo(f"name: {info.name}\npartitions: {info.partitions}")
                click.echo(
                    f"retention_ms: {info.retention_ms}\nretention_bytes: {info.retention_bytes}"
                )
                start = b.topic(name).start_offsets()
                for p, end in info.end_offsets.items():
                    held = f"offsets {start[p]}..{end - 1}" if end > start[p] else "empty"
                    click.echo(f"partition {p}: {held}, next offset {end}")
                return
        raise brook.errors.TopicNotFound(f"topic {name} does not exist")


@topics.command("delete")
@click.argument("name")
@data_option
@_friendly
def topics_delete(name: str, data: str) -> None:
    with _open(data) as b:
        b.delete_topic(name)
        click.echo(f"deleted {name}")


@main.command()
@click.argument("topic")
@click.argument("value", required=False)
@click.option("--key", default=None, help="Key for every record (UTF-8).")
@data_option
@_friendly
def produce(topic: str, value: str | None, key: str | None, data: str) -> None:
    """Append VALUE, or each line of standard input, to TOPIC."""
    with _open(data) as b:
        t = b.topic(topic)
        key_bytes = key.encode() if key is not None else None
        if value is not None:
            ack = t.append(value.encode(), key=key_bytes)
            click.echo(f"partition={ack.partition} offset={ack.offset}")
            return
        lines = [brook.Record(line.rstrip("\n").encode(), key=key_bytes) for line in sys.stdin]
        for start in range(0, len(lines), 1000):
            t.append_many(lines[start : start + 1000])
        click.echo(f"appended {len(lines)} records", err=True)


@main.command()
@click.argument("topic")
@click.option("--group", default=None, help="Stream group; its position is committed.")
@click.option("--from-beginning", is_flag=True, help="Without --group: start at the oldest record.")
@click.option("-n", "count", type=int, default=None, help="Stop after N records.")
@data_option
@_friendly
def consume(
    topic: str, group: str | None, from_beginning: bool, count: int | None, data: str
) -> None:
    """Print records of TOPIC, one value per line, until none are left (or -n are printed)."""
    with _open(data) as b:
        # Without a group, a throwaway cursor that is never committed.
        commit = group is not None
        start = "earliest" if from_beginning or commit else "latest"
        consumer = b.consumer(topic, group or f"cli-{threading.get_native_id()}", start=start)
        printed = 0
        while count is None or printed < count:
            want = 500 if count is None else min(500, count - printed)
            records = consumer.poll(max_records=want, timeout=0)
            if not records:
                break
            for record in records:
                click.echo(record.value.decode(errors="replace"))
            printed += len(records)
            if commit:
                consumer.commit()


if __name__ == "__main__":
    main()
