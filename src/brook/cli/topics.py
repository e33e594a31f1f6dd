"""`brook topics`: list, create, describe and delete topics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

import brook
from brook import limits
from brook.cli.common import broker_options, connect, shown
from brook.cli.errors import friendly


@click.group()
def topics() -> None:
    """List, create, describe and delete topics."""


@topics.command("list")
@broker_options
@friendly
def topics_list(data: str, url: str | None, api_key: str | None) -> None:
    with connect(data, url, api_key, read_only=True) as b:
        for info in b.topics():
            total = sum(info.end_offsets.values())
            click.echo(f"{info.name}\tpartitions={info.partitions}\trecords={total}")


@topics.command("create")
@click.argument("name")
@click.option(
    "--partitions", type=click.IntRange(1, limits.partitions_max), default=1, show_default=True
)
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
@click.option(
    "--lake/--no-lake",
    default=None,
    help="Keep the topic as Parquet too, or not (default: as the broker does, --lake).",
)
@click.option(
    "--value-schema",
    default=None,
    metavar="JSON|@FILE",
    help="The JSON Schema the values follow: the lake keeps their fields as typed columns.",
)
@broker_options
@friendly
def topics_create(
    name: str,
    partitions: int,
    retention_ms: int | None,
    retention_bytes: int | None,
    lake: bool | None,
    value_schema: str | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    with connect(data, url, api_key) as b:
        info = b.create_topic(
            name,
            partitions=partitions,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            lake=lake,
            value_schema=None if value_schema is None else _json_argument(value_schema),
        )
        click.echo(f"created {info.name} with {info.partitions} partitions")


def _json_argument(given: str) -> Any:
    """JSON given inline, or as @FILE."""
    text = given
    if given.startswith("@"):
        try:
            text = Path(given[1:]).read_text()
        except OSError as exc:
            raise click.BadParameter(
                f"cannot read {given[1:]}: {exc.strerror}", param_hint="--value-schema"
            ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--value-schema") from None


@topics.command("describe")
@click.argument("name")
@broker_options
@friendly
def topics_describe(name: str, data: str, url: str | None, api_key: str | None) -> None:
    with connect(data, url, api_key, read_only=True) as b:
        for info in b.topics():
            if info.name == name:
                click.echo(f"name: {info.name}\npartitions: {info.partitions}")
                keep = " (keep forever)"
                click.echo(
                    f"retention_ms: {shown(info.retention_ms)}"
                    f"{keep if info.retention_ms is None else ''}\n"
                    f"retention_bytes: {shown(info.retention_bytes)}"
                    f"{keep if info.retention_bytes is None else ''}\n"
                    f"compaction: {shown(info.compaction)}\n"
                    f"lake: {'as the broker does' if info.lake is None else shown(info.lake)}"
                )
                if info.value_schema is not None:
                    click.echo(f"value_schema: {json.dumps(info.value_schema)}")
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
    with connect(data, url, api_key) as b:
        b.delete_topic(name)
        click.echo(f"deleted {name}")
